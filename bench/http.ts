/**
 * HTTP throughput of the API next to a bare `node:http` server, in one run.
 *
 * Each server runs in its own child process; this process is only the load generator:
 * CONNECTIONS keep-alive sockets on loopback, each with one request in flight, for
 * WARMUP_S + SECONDS seconds per target; only responses to requests sent after the warm-up
 * count. Every response's status is checked during timing; bodies are checked before it.
 *
 *   npm run bench:http                          embedded mode (PGlite), plus server mode if DATABASE_URL is set
 *   BENCH_MODES=embedded npm run bench:http     only one mode (embedded | server)
 *   BENCH_CPU_PROF=1 npm run bench:http         profile the app (startup + the /v1/me run only); prints the hot spots
 *   BENCH_CONNECTIONS=64 BENCH_SECONDS=10 BENCH_WARMUP_S=2   the defaults
 */
import { mkdtempSync } from "node:fs"
import * as net from "node:net"
import { join } from "node:path"
import { createCompany, RATE_LIMIT_PER_WINDOW, requestedModes, startApp } from "./support/App.ts"
import { benchDatabase } from "./support/Database.ts"
import { freePort, runBench, stop, workspace } from "./support/Processes.ts"
import { summarizeProfile } from "./support/Profile.ts"
import { rawRequest, responseReader } from "./support/RawHttp.ts"
import { recordResults } from "./support/Results.ts"
import { machine, percentile, tally } from "./support/Report.ts"

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 2)
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? "info"
const PROFILE = process.env.BENCH_CPU_PROF === "1"
const ws = workspace("crm-bench-")

// ---------------------------------------------------------------- load generator

interface Result {
  readonly requests: number
  readonly errors: number
  readonly statuses: Map<number, number>
  readonly rps: number
  readonly p50: number
  readonly p99: number
}

/** Closed loop: each connection sends its next request as soon as the previous one is answered. */
const load = async (port: number, path: string, headers: Record<string, string>): Promise<Result> => {
  const request = rawRequest("GET", port, path, headers)
  const begin = performance.now()
  const measureFrom = begin + WARMUP_S * 1000
  const end = measureFrom + SECONDS * 1000
  let latencies = new Float64Array(1 << 16)
  let count = 0
  let errors = 0
  let stuck = 0
  const statuses = new Map<number, number>()
  const sockets = new Set<net.Socket>()
  const record = (ms: number, status: number) => {
    tally(statuses, status)
    if (status !== 200) errors++
    if (count === latencies.length) {
      const bigger = new Float64Array(latencies.length * 2)
      bigger.set(latencies)
      latencies = bigger
    }
    latencies[count++] = ms
  }

  const connection = () =>
    new Promise<void>((resolve, reject) => {
      const socket = net.connect({ port, host: "127.0.0.1", noDelay: true })
      sockets.add(socket)
      let sentAt = 0
      const send = () => {
        sentAt = performance.now()
        if (sentAt >= end) {
          socket.end()
          return resolve()
        }
        socket.write(request)
      }
      const read = responseReader((status, head) => {
        if (sentAt >= measureFrom) record(performance.now() - sentAt, status)
        if (/\r\nconnection: *close/i.test(head)) {
          socket.destroy()
          return reject(new Error(`server closed the connection:\n${head}`))
        }
        send()
      })
      socket.once("connect", send)
      socket.once("error", reject)
      socket.once("close", () => resolve())
      socket.on("data", (chunk: Buffer) => {
        try {
          read(chunk)
        } catch (error) {
          reject(error)
        }
      })
    })

  // A request still unanswered 10 s after the end counts as an error rather than hanging the bench.
  const guard = setTimeout(() => {
    for (const socket of sockets) {
      if (!socket.destroyed) {
        stuck++
        socket.destroy()
      }
    }
  }, end - begin + 10_000)
  await Promise.all(Array.from({ length: CONNECTIONS }, connection))
  clearTimeout(guard)
  errors += stuck
  if (stuck > 0) statuses.set(0, stuck)
  const elapsed = (Math.min(performance.now(), end) - measureFrom) / 1000
  const sorted = latencies.subarray(0, count).sort()
  return { requests: count, errors, statuses, rps: count / elapsed, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) }
}

// ---------------------------------------------------------------- targets

const bareServer = `
const http = require("node:http")
const body = JSON.stringify({ status: "ok" })
http.createServer((req, res) => {
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
  res.end(body)
}).listen(Number(process.env.PORT), "127.0.0.1")
`

const check = async (url: string, headers: Record<string, string>, verify: (body: any) => string | undefined) => {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(30_000) })
  const body = await res.json().catch(() => undefined)
  const problem = res.status !== 200 ? `status ${res.status}` : verify(body)
  if (problem !== undefined) throw new Error(`${url}: ${problem}; body ${JSON.stringify(body)}`)
}

const healthShape = (body: any) => (body?.status === "ok" ? undefined : "expected {status:'ok'}")

interface Row {
  readonly label: string
  readonly result: Result
}

const runApp = async (mode: "embedded" | "server") => {
  const database = mode === "server" ? await benchDatabase(process.env.DATABASE_URL!, "crm_bench") : undefined
  if (database !== undefined) console.log(`\n(server mode uses the fresh database ${database.name}, dropped afterwards)`)
  try {
    const app = await startApp(ws, { mode, logLevel: LOG_LEVEL, profile: PROFILE, dataDir: mkdtempSync(join(ws.dir, "data-")), databaseUrl: database?.url })
    try {
      const { companyId, token } = await createCompany(app)
      const auth = { authorization: `Bearer ${token}` }

      await check(`${app.base}/health`, {}, healthShape)
      await check(`${app.base}/v1/me`, auth, (body) =>
        body?.data?.current_company_id === companyId && body.data.is_service_account === true && Array.isArray(body.data.permissions)
          ? undefined
          : `expected {data:{current_company_id:${companyId}, is_service_account:true, permissions:[…]}}`)

      const rows: Array<Row> = []
      rows.push({ label: "GET /v1/me", result: await load(app.port, "/v1/me", auth) })
      // Profiling covers startup plus the /v1/me run only, so the hot spots are those of /v1/me.
      if (!PROFILE) rows.push({ label: "GET /health", result: await load(app.port, "/health", {}) })
      return { rows, profDir: app.profDir }
    } finally {
      await app.stop()
    }
  } finally {
    await database?.drop()
  }
}

// ---------------------------------------------------------------- main

const fmt = (n: number, digits = 0) => n.toFixed(digits)

const table = (rows: ReadonlyArray<Row>) => {
  console.log(`  ${"target".padEnd(22)} ${"req/s".padStart(9)} ${"p50 ms".padStart(8)} ${"p99 ms".padStart(8)} ${"requests".padStart(9)} ${"non-200".padStart(8)}`)
  for (const { label, result } of rows) {
    console.log(
      `  ${label.padEnd(22)} ${fmt(result.rps).padStart(9)} ${fmt(result.p50, 2).padStart(8)} ${fmt(result.p99, 2).padStart(8)} ${String(result.requests).padStart(9)} ${String(result.errors).padStart(8)}`
    )
  }
}

const main = async () => {
  const modes = requestedModes(["embedded", "server"], process.env.DATABASE_URL ? "embedded,server" : "embedded")
  if (modes.includes("server") && !process.env.DATABASE_URL) throw new Error("BENCH_MODES=server needs DATABASE_URL")

  console.log("HTTP bench")
  console.log(`  machine: ${machine()}`)
  console.log(`  node ${process.version} (load generator and servers)`)
  console.log(`  load: ${CONNECTIONS} keep-alive connections on loopback, 1 request in flight each, ${WARMUP_S} s warm-up + ${SECONDS} s measured per target`)
  console.log(`  app: child process \`node --import tsx src/main.ts\`, LOG_LEVEL=${LOG_LEVEL} (access log on at info), RATE_LIMIT_PER_WINDOW=${RATE_LIMIT_PER_WINDOW}`)
  console.log(`  modes: ${modes.map((m) => (m === "embedded" ? "embedded (PGlite)" : "server (PostgreSQL from DATABASE_URL, CLUSTER=socket)")).join(", ")}`)

  const barePort = await freePort()
  const bare = ws.start("bare", ["-e", bareServer], { ...process.env, PORT: String(barePort) })
  await ws.waitFor(`http://127.0.0.1:${barePort}/`, bare, "bare")
  await check(`http://127.0.0.1:${barePort}/`, {}, healthShape)
  const bareRow: Row = { label: "bare node:http", result: await load(barePort, "/", {}) }
  await stop(bare)

  let failed = false
  for (const mode of modes) {
    const { rows, profDir } = await runApp(mode)
    const all = [...rows, bareRow]
    console.log(`\nmode: ${mode === "embedded" ? "embedded (PGlite in a temp DATA_DIR)" : "server (PostgreSQL, DATABASE_URL)"}`)
    table(all)
    if (rows.length === 2) {
      const me = rows[0].result.rps
      const health = rows[1].result.rps
      const ratio = me / health
      console.log(`  /v1/me ÷ /health = ${ratio.toFixed(2)} (goal ≥ 0.40${ratio >= 0.4 ? ", met" : ", NOT met"})`)
      console.log(`  /health ÷ bare   = ${(health / bareRow.result.rps).toFixed(2)}`)
    } else {
      console.log("  (profiling: /health not measured, no ratios)")
    }
    for (const { label, result } of all) {
      if (result.errors > 0) {
        failed = true
        console.log(`  ${label}: ${result.errors} non-200 answers (status 0: no answer): ${JSON.stringify(Object.fromEntries(result.statuses))}`)
      }
    }
    if (PROFILE) summarizeProfile(profDir, { note: "whole process life", inclusiveByFile: true })
    recordResults("http", { title: "HTTP: latency against the rate answered (64 connections, closed loop)", x: "answered req/s", y: "latency ms", logX: true, logY: true, scatter: true }, { [`${mode} p50`]: all.map(({ result }) => [result.rps, result.p50]), [`${mode} p99`]: all.map(({ label, result }) => [result.rps, result.p99, label]) }, { mode, rows: all })
  }
  if (failed) process.exitCode = 1
}

void runBench(main, ws.cleanup)

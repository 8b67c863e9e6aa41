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
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { createServer, type Socket } from "node:net"
import * as net from "node:net"
import * as os from "node:os"
import { join, relative } from "node:path"

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 2)
// The limit is per token over a sliding 60 s window, and the bench sends everything with one token.
const RATE_LIMIT_PER_WINDOW = 1_000_000_000
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? "info"
const PROFILE = process.env.BENCH_CPU_PROF === "1"
const root = new URL("..", import.meta.url).pathname
const work = mkdtempSync(join(os.tmpdir(), "crm-bench-"))
const children = new Set<ChildProcess>()

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const start = (name: string, args: Array<string>, env: Record<string, string | undefined>) => {
  const out = openSync(join(work, `${name}.log`), "a")
  const child = spawn(process.execPath, args, { cwd: root, env: env as NodeJS.ProcessEnv, stdio: ["ignore", out, out] })
  closeSync(out)
  children.add(child)
  child.once("exit", () => children.delete(child))
  return child
}

const stop = async (child: ChildProcess) => {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once("exit", resolve))
  child.kill("SIGTERM")
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000)
  await exited
  clearTimeout(timer)
}

const waitFor = async (url: string, child: ChildProcess, name: string) => {
  const deadline = Date.now() + 120_000
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`${name} exited with ${child.exitCode}; log:\n${readFileSync(join(work, `${name}.log`), "utf8").slice(-4000)}`)
    }
    const ok = await fetch(url, { signal: AbortSignal.timeout(5_000) }).then((r) => r.ok, () => false)
    if (ok) return
    await sleep(200)
  }
  throw new Error(`${name} did not answer ${url} within 120 s; log:\n${readFileSync(join(work, `${name}.log`), "utf8").slice(-4000)}`)
}

/**
 * Server mode gets a database of its own on the DATABASE_URL server: runners left registered in a shared
 * database by a crashed process keep shard assignments until evicted, which can stall a new runner's start.
 */
const freshDatabase = async (url: string) => {
  const name = `crm_bench_${Date.now().toString(36)}_${process.pid}`
  const run = (statement: string) =>
    Effect.runPromise(
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe(statement)
      }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })))
    )
  await run(`CREATE DATABASE ${name}`)
  const fresh = new URL(url)
  fresh.pathname = `/${name}`
  return { name, url: fresh.toString(), drop: () => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) }
}

// ---------------------------------------------------------------- load generator

interface Result {
  readonly requests: number
  readonly errors: number
  readonly statuses: Map<number, number>
  readonly rps: number
  readonly p50: number
  readonly p99: number
}

/**
 * A raw HTTP/1.1 keep-alive client: one prebuilt request buffer per connection, responses framed
 * by Content-Length. Far cheaper per request than `http.request`, so on two cores the generator
 * takes less of the CPU that the server under test needs.
 */
const load = async (port: number, path: string, headers: Record<string, string>): Promise<Result> => {
  const request = Buffer.from(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n` +
      Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") + "\r\n",
    "latin1"
  )
  const begin = performance.now()
  const measureFrom = begin + WARMUP_S * 1000
  const end = measureFrom + SECONDS * 1000
  let latencies = new Float64Array(1 << 16)
  let count = 0
  let errors = 0
  let stuck = 0
  const statuses = new Map<number, number>()
  const sockets = new Set<Socket>()
  const record = (ms: number, status: number) => {
    statuses.set(status, (statuses.get(status) ?? 0) + 1)
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
      const socket: Socket = net.connect({ port, host: "127.0.0.1", noDelay: true })
      sockets.add(socket)
      let buffer: Buffer = Buffer.alloc(0)
      let sentAt = 0
      const send = () => {
        sentAt = performance.now()
        if (sentAt >= end) {
          socket.end()
          return resolve()
        }
        socket.write(request)
      }
      socket.once("connect", send)
      socket.once("error", reject)
      socket.once("close", () => resolve())
      socket.on("data", (chunk: Buffer) => {
        buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk])
        for (;;) {
          const headEnd = buffer.indexOf("\r\n\r\n")
          if (headEnd < 0) return
          const head = buffer.toString("latin1", 0, headEnd)
          const length = /\r\ncontent-length: *(\d+)/i.exec(head)
          if (length === null) return reject(new Error(`response without Content-Length:\n${head}`))
          const total = headEnd + 4 + Number(length[1])
          if (buffer.length < total) return
          if (sentAt >= measureFrom) record(performance.now() - sentAt, Number(head.slice(9, 12)))
          buffer = buffer.subarray(total)
          if (/\r\nconnection: *close/i.test(head)) {
            socket.destroy()
            return reject(new Error(`server closed the connection:\n${head}`))
          }
          send()
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
  const at = (q: number) => (count === 0 ? NaN : sorted[Math.min(count - 1, Math.floor(q * count))])
  return { requests: count, errors, statuses, rps: count / elapsed, p50: at(0.5), p99: at(0.99) }
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
  const database = mode === "server" ? await freshDatabase(process.env.DATABASE_URL!) : undefined
  if (database !== undefined) console.log(`\n(server mode uses the fresh database ${database.name}, dropped afterwards)`)
  const port = await freePort()
  const platformKey = `bench-${Math.random().toString(36).slice(2)}`
  const env: Record<string, string | undefined> = {
    ...process.env,
    PORT: String(port),
    REALTIME_PORT: String(await freePort()),
    RUNNER_PORT: String(await freePort()),
    HOST: "127.0.0.1",
    PLATFORM_API_KEY: platformKey,
    RATE_LIMIT_PER_WINDOW: String(RATE_LIMIT_PER_WINDOW),
    LOG_LEVEL,
    DATA_DIR: mkdtempSync(join(work, "data-")),
    DATABASE_URL: database?.url
  }
  if (database === undefined) delete env.DATABASE_URL
  const profDir = join(work, `prof-${mode}`)
  const args = ["--import", "tsx", ...(PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${profDir}`] : []), "src/main.ts"]
  const app = start(`app-${mode}`, args, env)
  const base = `http://127.0.0.1:${port}`
  try {
    await waitFor(`${base}/health`, app, `app-${mode}`)
    const created = await fetch(`${base}/platform/v1/companies`, {
      method: "POST",
      headers: { authorization: `Bearer ${platformKey}`, "content-type": "application/json" },
      signal: AbortSignal.timeout(60_000),
      body: JSON.stringify({
        name: `Bench ${Date.now()}`,
        plan: "business",
        admin: { email: `bench-${Date.now()}-${process.pid}@example.test`, password: "password-123", name: "Bench" }
      })
    })
    const company = (await created.json()) as any
    if (created.status !== 201) throw new Error(`createCompany: ${created.status} ${JSON.stringify(company)}`)
    const companyId = company.data.company.id as number
    const auth = { authorization: `Bearer ${company.data.token as string}` }

    await check(`${base}/health`, {}, healthShape)
    await check(`${base}/v1/me`, auth, (body) =>
      body?.data?.current_company_id === companyId && body.data.is_service_account === true && Array.isArray(body.data.permissions)
        ? undefined
        : `expected {data:{current_company_id:${companyId}, is_service_account:true, permissions:[…]}}`)

    const rows: Array<Row> = []
    rows.push({ label: "GET /v1/me", result: await load(port, "/v1/me", auth) })
    // Profiling covers startup plus the /v1/me run only, so the hot spots are those of /v1/me.
    if (!PROFILE) rows.push({ label: "GET /health", result: await load(port, "/health", {}) })
    return { rows, profDir }
  } finally {
    await stop(app)
    await database?.drop()
  }
}

// ---------------------------------------------------------------- profile summary

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly children?: ReadonlyArray<number>
}

/** Self time per function and per package/file, from the samples of a .cpuprofile. */
const summarizeProfile = (dir: string) => {
  if (!existsSync(dir)) return console.log(`  (no profile written in ${dir})`)
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"))) {
    const profile = JSON.parse(readFileSync(join(dir, file), "utf8")) as {
      nodes: Array<ProfileNode>
      samples: Array<number>
      timeDeltas: Array<number>
    }
    const byId = new Map(profile.nodes.map((n) => [n.id, n]))
    const parent = new Map<number, number>()
    for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
    const fileOf = (node: ProfileNode) => {
      const url = node.callFrame.url.replace(/^file:\/\//, "")
      return url === "" ? "" : url.includes("node_modules/") ? url.slice(url.lastIndexOf("node_modules/") + 13) : relative(root, url)
    }
    const inclusiveByFile = new Map<string, number>()
    const selfByFn = new Map<string, number>()
    const selfByModule = new Map<string, number>()
    let total = 0
    profile.samples.forEach((id, i) => {
      const node = byId.get(id)!
      const dt = profile.timeDeltas[i] ?? 0
      total += dt
      const url = node.callFrame.url.replace(/^file:\/\//, "")
      const where = url === "" ? "" : relative(root, url)
      const fn = `${node.callFrame.functionName || "(anonymous)"} ${where}:${node.callFrame.lineNumber + 1}`
      selfByFn.set(fn, (selfByFn.get(fn) ?? 0) + dt)
      const module = where === ""
        ? node.callFrame.functionName || "(native)"
        : where.includes("node_modules/")
        ? where.split("node_modules/").pop()!.split("/").slice(0, where.includes("node_modules/@") ? 2 : 1).join("/")
        : where.startsWith("node:")
        ? "node internals"
        : where
      selfByModule.set(module, (selfByModule.get(module) ?? 0) + dt)
      const seen = new Set<string>()
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const file = fileOf(byId.get(at)!)
        if (file !== "" && !file.startsWith("node:") && !seen.has(file)) {
          seen.add(file)
          inclusiveByFile.set(file, (inclusiveByFile.get(file) ?? 0) + dt)
        }
      }
    })
    const top = (m: Map<string, number>, n: number) =>
      [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, v]) => `  ${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`)
    console.log(`\nCPU profile ${file} (${(total / 1e6).toFixed(1)} s sampled, whole process life)`)
    console.log("self time by package / file:")
    console.log(top(selfByModule, 15).join("\n"))
    console.log("self time by function:")
    console.log(top(selfByFn, 25).join("\n"))
    console.log("inclusive time by file (any frame of the file on the synchronous stack):")
    console.log(top(inclusiveByFile, 30).join("\n"))
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
  const requested = (process.env.BENCH_MODES ?? (process.env.DATABASE_URL ? "embedded,server" : "embedded")).split(",")
  const modes = requested.map((m) => m.trim()).filter((m): m is "embedded" | "server" => m === "embedded" || m === "server")
  if (modes.includes("server") && !process.env.DATABASE_URL) throw new Error("BENCH_MODES=server needs DATABASE_URL")

  const cpus = os.cpus()
  console.log("HTTP bench")
  console.log(`  machine: ${cpus[0]?.model ?? "?"}, ${cpus.length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.type()} ${os.release()}`)
  console.log(`  node ${process.version} (load generator and servers)`)
  console.log(`  load: ${CONNECTIONS} keep-alive connections on loopback, 1 request in flight each, ${WARMUP_S} s warm-up + ${SECONDS} s measured per target`)
  console.log(`  app: child process \`node --import tsx src/main.ts\`, LOG_LEVEL=${LOG_LEVEL} (access log on at info), RATE_LIMIT_PER_WINDOW=${RATE_LIMIT_PER_WINDOW}`)
  console.log(`  modes: ${modes.map((m) => (m === "embedded" ? "embedded (PGlite)" : "server (PostgreSQL from DATABASE_URL, CLUSTER=socket)")).join(", ")}`)

  const barePort = await freePort()
  const bare = start("bare", ["-e", bareServer], { ...process.env, PORT: String(barePort) })
  await waitFor(`http://127.0.0.1:${barePort}/`, bare, "bare")
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
    if (PROFILE) summarizeProfile(profDir)
  }
  if (failed) process.exitCode = 1
}

const cleanup = async () => {
  await Promise.all([...children].map(stop))
  rmSync(work, { recursive: true, force: true })
}

process.once("SIGINT", () => void cleanup().then(() => process.exit(130)))
main().then(cleanup, async (error) => {
  console.error(error)
  await cleanup()
  process.exit(1)
})

/**
 * Realtime fan-out at SOCKETS sockets on one company channel, EVENTS events each, in one run:
 *
 *   1. the app (child process, embedded PGlite unless DATABASE_URL is set): every socket authorised through
 *      `POST /v1/broadcasting/auth` with the company's token; each event is a sandbox inbound message
 *      (`POST /v1/channels/:id/sandbox/inbound`), timed from the request to the last client's
 *      `message.created` (HTTP, write, commit, numbering, dispatch and fan-out);
 *   2. the gateway alone (the app's `RealtimeGateway`, the same engine, in a process of its own),
 *      publishing the very frame the app sent, timed from the publish command to the last client;
 *   3. a plain `ws` server looping `client.send(text)` over the same number of sockets, same bytes.
 *
 * Reported per target: p50/p99/max of the time to the last client over the events, the engine, and
 * for 2 and 3 the CPU per publish of the server process. The clients (bench/support/WsClients.ts) are
 * raw TCP with hand-parsed frames, so the load generator costs as little as it can per delivery.
 *
 *   npm run bench:realtime                         SOCKETS=10000 EVENTS=50 by default
 *   SOCKETS=1000 EVENTS=20 DATABASE_URL=… npm run bench:realtime
 *   REALTIME_TARGETS=servers                       only 2 and 3 (a synthetic frame of about the app's size)
 *   BENCH_CPU_PROF_DIR=/tmp/prof                   CPU profiles of the servers of 2 and 3 (gateway/, plain/)
 *   NODE_FOR_UWS=/usr/bin/node                     also 2 with uWebSockets.js under that Node, if a build loads there
 *   REALTIME_TARGETS=engines                       2 on `ws` and 2 on uWS (where it loads), same frame, one run:
 *                                                  the ratio of their CPU per publish (goal ≤ 0.5 for uWS)
 */
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { Effect, Layer } from "effect"
import { WebSocketServer } from "ws"
import { RealtimeGateway } from "../src/realtime/Gateway.ts"
import * as Pusher from "../src/realtime/Pusher.ts"
import { loadNativeUws } from "../src/realtime/UwsTransport.ts"
import { api, createCompany, startApp } from "./support/App.ts"
import { benchDatabase } from "./support/Database.ts"
import { root, runBench, sleep, workspace } from "./support/Processes.ts"
import { machine, percentile } from "./support/Report.ts"
import { recordResults } from "./support/Results.ts"
import { type ClientPool, openPool } from "./support/WsClients.ts"

const APP_KEY = "bench-key"
const APP_SECRET = "bench-secret"
const SOCKETS = Number(process.env.SOCKETS ?? 10_000)
const EVENTS = Number(process.env.EVENTS ?? 50)
const MARKER = "\"event\":\"message.created\""
const EVENT_TIMEOUT_MS = 30_000
/** `servers`: only 2 and 3, with a synthetic frame of the app's size (an A/B of the gateway without the app's 10k authorisations). */
const TARGETS = process.env.REALTIME_TARGETS ?? "all"
const ws = workspace("crm-bench-realtime-")

interface Usage {
  readonly cpuMs: number
  /** The kernel's share of `cpuMs`: on loopback a socket write also delivers the bytes to the reader. */
  readonly systemMs: number
  readonly rssMb: number
}

const usage = (): Usage => {
  const cpu = process.cpuUsage()
  return { cpuMs: (cpu.user + cpu.system) / 1000, systemMs: cpu.system / 1000, rssMb: process.memoryUsage().rss / 2 ** 20 }
}

/**
 * A server process of its own, driven by lines on stdin: `publish <frame as JSON string>` publishes one
 * frame, `usage` answers CPU and RSS. `gateway`: the app's RealtimeGateway; `plain`: a bare `ws` loop.
 */
const serveGateway = (engine: "uws" | "ws") =>
  Effect.gen(function*() {
    const gateway = yield* RealtimeGateway
    console.log(JSON.stringify({ port: gateway.port, engine: gateway.engine, node: process.version }))
    createInterface({ input: process.stdin }).on("line", (line) => {
      if (line === "usage") return console.log(JSON.stringify(usage()))
      if (!line.startsWith("publish ")) return
      // The frame the app sent, taken apart so that the gateway serialises it back to the same bytes.
      const frame = JSON.parse(JSON.parse(line.slice(8))) as { event: string; channel: string; data: string }
      Effect.runSync(gateway.publish(frame.channel, frame.event, JSON.parse(frame.data)))
      console.log(JSON.stringify({ published: 1 }))
    })
    return yield* Effect.never
  }).pipe(
    Effect.provide(Layer.fresh(RealtimeGateway.layer({ host: "127.0.0.1", port: 0, appKey: APP_KEY, appSecret: APP_SECRET, engine, maxBackpressureBytes: 16 * 2 ** 20 }))),
    Effect.scoped
  )

const servePlain = () => {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, perMessageDeflate: false })
  wss.on("listening", () => {
    console.log(JSON.stringify({ port: (wss.address() as { port: number }).port, engine: "plain ws loop", node: process.version }))
  })
  createInterface({ input: process.stdin }).on("line", (line) => {
    if (line === "usage") return console.log(JSON.stringify(usage()))
    if (!line.startsWith("publish ")) return
    const text = JSON.parse(line.slice(8)) as string
    for (const client of wss.clients) client.send(text)
    console.log(JSON.stringify({ published: 1 }))
  })
}

interface Result {
  readonly target: string
  readonly engine: string
  readonly node: string
  readonly times: ReadonlyArray<number>
  /** This process's CPU per event: the clients reading the frames (and, for the app, the inbound request). */
  readonly clientCpuMs: number
  readonly cpuPerPublishMs?: number
  readonly systemPerPublishMs?: number
  readonly rssMb?: number
}

const summary = (r: Result) => {
  const sorted = Float64Array.from(r.times.filter((t) => !Number.isNaN(t))).sort()
  const missed = r.times.length - sorted.length
  return {
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    missed
  }
}

const print = (r: Result) => {
  const s = summary(r)
  recordResults("realtime", { title: `Realtime: time to the last of ${SOCKETS} sockets, event by event`, x: "event", y: "ms to the last socket", logY: true }, { [`${r.target} (${r.engine}, Node ${r.node})`]: r.times.map((t, i) => [i + 1, t]) }, { ...r, times: undefined, summary: s })
  console.log(
    `  ${r.target.padEnd(14)} ${r.engine.padEnd(14)} Node ${r.node.padEnd(9)} to the last of ${SOCKETS}: p50 ${s.p50.toFixed(1).padStart(7)} ms` +
      `  p99 ${s.p99.toFixed(1).padStart(7)} ms  max ${s.max.toFixed(1).padStart(7)} ms` +
      `  clients CPU ${r.clientCpuMs.toFixed(1)} ms/event` +
      (r.cpuPerPublishMs === undefined ? "" : `  server CPU ${r.cpuPerPublishMs.toFixed(1)} ms/publish (kernel ${r.systemPerPublishMs!.toFixed(1)}), RSS ${r.rssMb!.toFixed(0)} MB`) +
      (s.missed > 0 ? `  (${s.missed} events not delivered to every socket within ${EVENT_TIMEOUT_MS / 1000} s)` : "")
  )
}

/** Times `publish()` to the last client, one event at a time. */
const timeEvents = async (pool: ClientPool, publish: () => Promise<void>) => {
  const times: Array<number> = []
  const cpu = process.cpuUsage()
  for (let n = 0; n < EVENTS; n++) {
    const started = performance.now()
    await publish()
    const last = await pool.lastArrival(n, EVENT_TIMEOUT_MS)
    times.push(last - started)
    await sleep(50)
  }
  const used = process.cpuUsage(cpu)
  return { times, clientCpuMs: (used.user + used.system) / 1000 / EVENTS }
}

// ---------------------------------------------------------------- 1. the app

const runApp = async () => {
  const database = process.env.DATABASE_URL === undefined ? undefined : await benchDatabase(process.env.DATABASE_URL, "crm_bench_realtime")
  const mode = database === undefined ? "embedded" : "server"
  const dataDir = mkdtempSync(join(ws.dir, "data-"))
  process.env.PUSHER_APP_KEY = APP_KEY
  process.env.PUSHER_APP_SECRET = APP_SECRET
  const app = await startApp(ws, { mode, logLevel: "warn", profile: false, dataDir, databaseUrl: database?.url })
  let pool: ClientPool | undefined
  try {
    const realtimePort = app.realtimePort
    const { companyId, token } = await createCompany(app)
    const call = api(app.base, token)
    const channel = await call("POST", "/v1/channels", { type: "msgr_b", provider: "sandbox", name: "bench" })
    if (channel.status !== 201) throw new Error(`create channel: ${JSON.stringify(channel)}`)
    const inbound = (text: string) =>
      call("POST", `/v1/channels/${channel.body.data.id}/sandbox/inbound`, { from: { external_id: "rt-1", name: "Realtime" }, text })
    // The contact and conversation exist before timing: each timed inbound then emits one message.created.
    if ((await inbound("warm-up")).status !== 201) throw new Error("warm-up inbound")
    const channelName = `private-company.${companyId}`
    const authorised = performance.now()
    pool = await openPool({
      port: realtimePort,
      path: `/app/${APP_KEY}?protocol=7`,
      sockets: SOCKETS,
      opening: 32,
      marker: MARKER,
      maxEvents: EVENTS,
      readyMarker: "pusher_internal:subscription_succeeded",
      greet: async (first) => {
        const socketId = (JSON.parse((JSON.parse(first) as { data: string }).data) as { socket_id: string }).socket_id
        const grant = await call("POST", "/v1/broadcasting/auth", { socket_id: socketId, channel_name: channelName })
        if (grant.status !== 200) throw new Error(`broadcasting auth: ${JSON.stringify(grant)}`)
        return JSON.stringify({ event: "pusher:subscribe", data: { channel: channelName, auth: grant.body.auth, channel_data: grant.body.channel_data } })
      }
    })
    console.log(`  app (${mode}): ${SOCKETS} sockets authorised through /v1/broadcasting/auth and subscribed in ${((performance.now() - authorised) / 1000).toFixed(1)} s`)
    const engine = "uws" in loadNativeUws() ? "uws" : "ws"
    const timed = await timeEvents(pool, async () => {
      const res = await inbound("hello")
      if (res.status !== 201) throw new Error(`inbound: ${JSON.stringify(res)}`)
    })
    return { result: { target: "app (inbound)", engine, node: process.version, ...timed } satisfies Result, sample: pool.sample() }
  } finally {
    pool?.close()
    await app.stop()
    await database?.drop()
  }
}

// ---------------------------------------------------------------- 2 and 3: a server of its own

const runServer = async (nodePath: string, role: "gateway" | "plain", engine: "uws" | "ws", sample: string) => {
  const profile = process.env.BENCH_CPU_PROF_DIR === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CPU_PROF_DIR}/${role}`]
  const child = spawn(nodePath, [...profile, "--import", "tsx", "bench/realtime.ts"], {
    cwd: root,
    env: { ...process.env, REALTIME_BENCH_ROLE: role, REALTIME_BENCH_ENGINE: engine, LOG_LEVEL: "warn" },
    stdio: ["pipe", "pipe", "inherit"]
  })
  const replies = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  const reply = async () => {
    while (true) {
      const next = await replies.next()
      if (next.done) throw new Error("server exited")
      if (next.value.startsWith("{")) return JSON.parse(next.value)
    }
  }
  let pool: ClientPool | undefined
  try {
    const hello = (await reply()) as { port: number; engine: string; node: string }
    const channel = (JSON.parse(sample) as { channel: string }).channel
    pool = await openPool({
      port: hello.port,
      path: `/app/${APP_KEY}?protocol=7`,
      sockets: SOCKETS,
      marker: MARKER,
      maxEvents: EVENTS,
      ...(role === "plain" ? {} : {
        readyMarker: "pusher_internal:subscription_succeeded",
        greet: async (first: string) => {
          const socketId = (JSON.parse((JSON.parse(first) as { data: string }).data) as { socket_id: string }).socket_id
          return JSON.stringify({ event: "pusher:subscribe", data: { channel, auth: Pusher.authFor(APP_KEY, APP_SECRET, socketId, channel) } })
        }
      })
    })
    child.stdin!.write("usage\n")
    const before = (await reply()) as Usage
    const line = `publish ${JSON.stringify(sample)}\n`
    const timed = await timeEvents(pool, async () => {
      child.stdin!.write(line)
      await reply()
    })
    child.stdin!.write("usage\n")
    const after = (await reply()) as Usage
    return {
      target: role === "plain" ? "plain ws loop" : "gateway alone",
      engine: hello.engine,
      node: hello.node,
      ...timed,
      cpuPerPublishMs: (after.cpuMs - before.cpuMs) / EVENTS,
      systemPerPublishMs: (after.systemMs - before.systemMs) / EVENTS,
      rssMb: after.rssMb
    } satisfies Result
  } finally {
    pool?.close()
    child.kill("SIGINT")
    await new Promise((resolve) => child.once("exit", resolve))
  }
}

const probeUws = (nodePath: string) => {
  try {
    const probe = 'import("./src/realtime/UwsTransport.ts").then((m) => console.log("uws" in m.loadNativeUws() ? "loads" : "no"))'
    const out = execFileSync(nodePath, ["--import", "tsx", "-e", probe], { cwd: root, encoding: "utf8" })
    return out.trim().endsWith("loads")
  } catch {
    return false
  }
}

const role = process.env.REALTIME_BENCH_ROLE
// A clean exit writes the CPU profile (--cpu-prof).
if (role !== undefined) process.on("SIGINT", () => process.exit(0))
if (role === "gateway") Effect.runFork(serveGateway(process.env.REALTIME_BENCH_ENGINE as "uws" | "ws").pipe(Effect.orDie))
else if (role === "plain") servePlain()
else {
  void runBench(async () => {
    console.log(`Realtime fan-out: ${SOCKETS} sockets on one company channel, ${EVENTS} events one at a time; ${machine()}, node ${process.version}`)
    if (TARGETS === "engines") {
      const sample = Pusher.channelEvent("private-company.1", "message.created", { seq: 1, event: "message.created", data: { text: "x".repeat(780) } })
      const native = loadNativeUws()
      if (!("uws" in native)) throw new Error(`REALTIME_TARGETS=engines needs uWebSockets.js: ${native.reason}`)
      const onWs = await runServer(process.execPath, "gateway", "ws", sample)
      print(onWs)
      const onUws = await runServer(process.execPath, "gateway", "uws", sample)
      print(onUws)
      const ratio = onUws.cpuPerPublishMs / onWs.cpuPerPublishMs
      console.log(`  gateway CPU per publish, uws ÷ ws = ${ratio.toFixed(2)} (goal ≤ 0.5 ${ratio <= 0.5 ? "met" : "NOT met"})`)
      // The kernel's work per socket write is the same under either engine: uWS's kernel time alone bounds the ratio from below.
      console.log(`  floor: uws kernel time ÷ ws total = ${(onUws.systemPerPublishMs / onWs.cpuPerPublishMs).toFixed(2)} (uws user ${(onUws.cpuPerPublishMs - onUws.systemPerPublishMs).toFixed(1)} ms, ws user ${(onWs.cpuPerPublishMs - onWs.systemPerPublishMs).toFixed(1)} ms per publish)`)
      return
    }
    if (TARGETS === "servers") {
      const sample = Pusher.channelEvent("private-company.1", "message.created", { seq: 1, event: "message.created", data: { text: "x".repeat(780) } })
      print(await runServer(process.execPath, "gateway", "uws" in loadNativeUws() ? "uws" : "ws", sample))
      print(await runServer(process.execPath, "plain", "ws", sample))
      return
    }
    const { result, sample } = await runApp()
    print(result)
    if (sample === undefined) throw new Error("no event reached the clients")
    console.log(`  frame: ${Buffer.byteLength(sample)} bytes`)
    const engine = result.engine as "uws" | "ws"
    const gateway = await runServer(process.execPath, "gateway", engine, sample)
    print(gateway)
    const plain = await runServer(process.execPath, "plain", "ws", sample)
    print(plain)
    const p99 = (r: Result) => summary(r).p99
    console.log(`  plain ws loop p99 ÷ gateway alone p99 = ${(p99(plain) / p99(gateway)).toFixed(2)} (goal ≥ 3); ÷ app = ${(p99(plain) / p99(result)).toFixed(2)}`)
    console.log(`  app p99 ${p99(result).toFixed(1)} ms (goal ≤ 50 ${p99(result) <= 50 ? "met" : "NOT met"})`)
    const otherNode = process.env.NODE_FOR_UWS
    if (engine !== "uws" && otherNode !== undefined && probeUws(otherNode)) {
      print(await runServer(otherNode, "gateway", "uws", sample))
      print(await runServer(otherNode, "plain", "ws", sample))
    }
  }, ws.cleanup)
}

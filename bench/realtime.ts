/**
 * Realtime fan-out: one gateway process (the real `RealtimeGateway`, so the Pusher protocol code of the
 * app) per engine, SOCKETS pusher clients subscribed to one private channel, PUBLISHES events of about
 * 300 bytes published back to back. Reports deliveries per second (until every socket has every event),
 * the gateway's CPU per publish and its memory. See bench/README.md.
 *
 *   npm run bench:realtime            (SOCKETS=1000 PUBLISHES=100 by default)
 *
 * Engines: `ws` under the pinned Node; `uws` wherever a native build loads: under the pinned Node, else
 * under the machine's `node` on PATH outside node_modules (`NODE_FOR_UWS`, default /usr/bin/node), with
 * `ws` also run there so the two engines compare on the same Node.
 */
import { execFileSync, spawn } from "node:child_process"
import { createInterface } from "node:readline"
import { Effect, Layer } from "effect"
import WebSocket from "ws"
import { RealtimeGateway } from "../src/realtime/Gateway.ts"
import * as Pusher from "../src/realtime/Pusher.ts"
import { loadNativeUws } from "../src/realtime/UwsTransport.ts"
import { root, runBench, sleep } from "./support/Processes.ts"
import { machine } from "./support/Report.ts"

const APP_KEY = "bench-key"
const APP_SECRET = "bench-secret"
const CHANNEL = "private-company.1"
const SOCKETS = Number(process.env.SOCKETS ?? 1000)
const PUBLISHES = Number(process.env.PUBLISHES ?? 100)

interface Usage {
  readonly cpuMs: number
  readonly rssMb: number
}

/** The gateway side, in its own process: reads `publish N` and `usage` lines, answers JSON lines. */
const serve = (engine: "uws" | "ws") =>
  Effect.gen(function*() {
    const gateway = yield* RealtimeGateway
    const usage = (): Usage => {
      const cpu = process.cpuUsage()
      return { cpuMs: (cpu.user + cpu.system) / 1000, rssMb: process.memoryUsage().rss / 2 ** 20 }
    }
    console.log(JSON.stringify({ port: gateway.port, engine: gateway.engine, node: process.version }))
    createInterface({ input: process.stdin }).on("line", (line) => {
      if (line === "usage") console.log(JSON.stringify(usage()))
      const publish = /^publish (\d+)$/.exec(line)
      if (publish === null) return
      const count = Number(publish[1])
      Effect.runSync(Effect.forEach(Array.from({ length: count }, (_, n) => n), (n) =>
        gateway.publish(CHANNEL, "message.created", { n, text: "x".repeat(240) }), { discard: true }))
      console.log(JSON.stringify({ published: count }))
    })
    return yield* Effect.never
  }).pipe(
    Effect.provide(Layer.fresh(RealtimeGateway.layer({ host: "127.0.0.1", port: 0, appKey: APP_KEY, appSecret: APP_SECRET, engine, maxBackpressureBytes: 16 * 2 ** 20 }))),
    Effect.scoped
  )

const probeUws = (nodePath: string) => {
  try {
    const probe = 'import("./src/realtime/UwsTransport.ts").then((m) => console.log("uws" in m.loadNativeUws() ? "loads" : "no"))'
    const out = execFileSync(nodePath, ["--import", "tsx", "-e", probe], { cwd: root, encoding: "utf8" })
    return out.trim().endsWith("loads")
  } catch {
    return false
  }
}

const run = async (nodePath: string, engine: "uws" | "ws") => {
  const child = spawn(nodePath, ["--import", "tsx", "bench/realtime.ts"], {
    cwd: root,
    env: { ...process.env, REALTIME_BENCH_ROLE: "gateway", REALTIME_BENCH_ENGINE: engine, LOG_LEVEL: "warn" },
    stdio: ["pipe", "pipe", "inherit"]
  })
  const replies = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  const reply = async () => {
    while (true) {
      const next = await replies.next()
      if (next.done) throw new Error("gateway exited")
      if (next.value.startsWith("{")) return JSON.parse(next.value)
    }
  }
  try {
    const hello = (await reply()) as { port: number; engine: string; node: string }
    let received = 0
    let allDone: () => void = () => {}
    const done = new Promise<void>((resolve) => (allDone = resolve))
    const sockets: Array<WebSocket> = []
    const subscribed: Array<Promise<void>> = []
    for (let i = 0; i < SOCKETS; i++) {
      const ws = new WebSocket(`ws://127.0.0.1:${hello.port}/app/${APP_KEY}?protocol=7`)
      sockets.push(ws)
      subscribed.push(new Promise((resolve, reject) => {
        ws.on("error", reject)
        ws.on("message", (raw) => {
          const frame = JSON.parse(raw.toString()) as { event: string; data: string }
          if (frame.event === "pusher:connection_established") {
            const socketId = (JSON.parse(frame.data) as { socket_id: string }).socket_id
            ws.send(JSON.stringify({ event: "pusher:subscribe", data: { channel: CHANNEL, auth: Pusher.authFor(APP_KEY, APP_SECRET, socketId, CHANNEL) } }))
          } else if (frame.event === "pusher_internal:subscription_succeeded") resolve()
          else if (frame.event === "message.created" && ++received === SOCKETS * PUBLISHES) allDone()
        })
      }))
      if (i % 200 === 199) await sleep(20)
    }
    await Promise.all(subscribed)
    child.stdin!.write("usage\n")
    const before = (await reply()) as Usage
    const started = performance.now()
    child.stdin!.write(`publish ${PUBLISHES}\n`)
    await reply()
    const timeout = sleep(120_000).then(() => {
      throw new Error(`only ${received} of ${SOCKETS * PUBLISHES} deliveries within 120 s`)
    })
    await Promise.race([done, timeout])
    const seconds = (performance.now() - started) / 1000
    child.stdin!.write("usage\n")
    const after = (await reply()) as Usage
    for (const ws of sockets) ws.terminate()
    const cpuPerPublish = (after.cpuMs - before.cpuMs) / PUBLISHES
    console.log(
      `${hello.engine.padEnd(4)} on Node ${hello.node.padEnd(9)} ${(SOCKETS * PUBLISHES / seconds).toFixed(0).padStart(9)} deliveries/s` +
        `  ${(seconds * 1000).toFixed(0).padStart(6)} ms for all  gateway CPU ${cpuPerPublish.toFixed(2).padStart(6)} ms/publish` +
        `  RSS ${after.rssMb.toFixed(0)} MB`
    )
  } finally {
    child.kill("SIGTERM")
  }
}

const role = process.env.REALTIME_BENCH_ROLE
if (role === "gateway") {
  Effect.runFork(serve(process.env.REALTIME_BENCH_ENGINE as "uws" | "ws").pipe(Effect.orDie))
} else {
  const otherNode = process.env.NODE_FOR_UWS ?? "/usr/bin/node"
  const pinnedHasUws = "uws" in loadNativeUws()
  const runs: Array<[string, "uws" | "ws"]> = [[process.execPath, "ws"]]
  if (pinnedHasUws) runs.push([process.execPath, "uws"])
  else if (otherNode !== process.execPath && probeUws(otherNode)) runs.push([otherNode, "ws"], [otherNode, "uws"])
  else console.log(`uws: no native build loads under ${process.version} nor ${otherNode}; ws only`)
  void runBench(async () => {
    console.log(`realtime fan-out: ${SOCKETS} sockets on one channel, ${PUBLISHES} publishes of ~300 bytes; ${machine()}`)
    for (const [nodePath, engine] of runs) await run(nodePath, engine)
  })
}

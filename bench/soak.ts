/**
 * Soak: the app under mixed load for a long time, sampled every 10 s.
 *
 * The app runs in this process on a database of its own (dropped at the end), so its RSS, heap and
 * event-loop delay are what is sampled; the load runs in a child process (this file with
 * SOAK_ROLE=load): contact writes, sandbox inbound messages, sends on their threads, contact and
 * message searches, an export a minute, webhooks for every contact.created to a receiver here that
 * answers after 0–2 s and is down (503) one request in five, and SOAK_SOCKETS realtime sockets
 * subscribed to the company's private channel.
 *
 * At the end: every write the API acknowledged (201) is looked up in the database.
 * Goals: heap after warm-up grows ≤ 5 %; event-loop delay p99 ≤ 50 ms; no 5xx; no acknowledged write missing.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/soak.ts
 *   SOAK_SECONDS=180 (default 1200), SOAK_WARMUP_S=60, SOAK_SOCKETS=1000, SOAK_CONCURRENCY=4 (per kind of load)
 */
import { fork } from "node:child_process"
import { createServer } from "node:http"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import { Effect } from "effect"
import { RealtimeGateway } from "../src/realtime/Gateway.ts"
import { api, startInProcess } from "./support/App.ts"
import { benchDatabase, runSql } from "./support/Database.ts"
import { runBench } from "./support/Processes.ts"
import { machine } from "./support/Report.ts"
import { openPool } from "./support/WsClients.ts"

const SECONDS = Number(process.env.SOAK_SECONDS ?? 1200)
const WARMUP_S = Number(process.env.SOAK_WARMUP_S ?? 60)
const SOCKETS = Number(process.env.SOAK_SOCKETS ?? 1000)
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 4)
const SAMPLE_MS = 10_000

interface LoadReport {
  readonly requests: Record<string, number>
  readonly statuses: Record<string, number>
  readonly fivexx: Array<string>
  readonly contacts: Array<number>
  readonly messages: Array<number>
  readonly sockets: number
  readonly socketEvents: number
}

// ---------------------------------------------------------------- the load (child process)

const load = async () => {
  const base = process.env.SOAK_BASE!
  const call = api(base, process.env.SOAK_TOKEN!)
  const until = Date.now() + SECONDS * 1000
  const report: LoadReport = { requests: {}, statuses: {}, fivexx: [], contacts: [], messages: [], sockets: 0, socketEvents: 0 }
  const count = (kind: string, status: number, body: unknown) => {
    report.requests[kind] = (report.requests[kind] ?? 0) + 1
    report.statuses[status] = (report.statuses[status] ?? 0) + 1
    if (status >= 500 && report.fivexx.length < 20) report.fivexx.push(`${kind} ${status} ${JSON.stringify(body).slice(0, 200)}`)
  }
  const channel = await call("POST", "/v1/channels", { type: "msgr_b", provider: "sandbox", name: "soak" })
  if (channel.status !== 201) throw new Error(`create channel: ${JSON.stringify(channel)}`)
  const channelId = channel.body.data.id as number
  const threads: Array<number> = []
  for (let i = 0; i < 8; i++) {
    const inbound = await call("POST", `/v1/channels/${channelId}/sandbox/inbound`, { from: { external_id: `soak-${i}`, name: `Soak ${i}` }, text: "hello" })
    const detail = await call("GET", `/v1/conversations/${inbound.body.data.conversation_id}`)
    threads.push(detail.body.data.threads[0].id)
  }
  const companyId = Number(process.env.SOAK_COMPANY)
  const pool = await openPool({
    port: Number(process.env.SOAK_RT_PORT),
    path: `/app/${process.env.SOAK_APP_KEY}?protocol=7`,
    sockets: SOCKETS,
    opening: 32,
    marker: "soak-marker",
    maxEvents: 1,
    readyMarker: "pusher_internal:subscription_succeeded",
    greet: async (first) => {
      const socketId = (JSON.parse((JSON.parse(first) as { data: string }).data) as { socket_id: string }).socket_id
      const grant = await call("POST", "/v1/broadcasting/auth", { socket_id: socketId, channel_name: `private-company.${companyId}` })
      return JSON.stringify({ event: "pusher:subscribe", data: { channel: `private-company.${companyId}`, auth: grant.body.auth } })
    }
  })
  ;(report as { sockets: number }).sockets = pool.size
  let n = 0
  const kinds: Record<string, () => Promise<void>> = {
    contact: async () => {
      const res = await call("POST", "/v1/contacts", { firstName: `Soak${n++}`, lastName: "Load" })
      count("contact", res.status, res.body)
      if (res.status === 201) report.contacts.push(res.body.data.id)
    },
    inbound: async () => {
      const res = await call("POST", `/v1/channels/${channelId}/sandbox/inbound`, { from: { external_id: `in-${n++ % 500}`, name: "Inbound" }, text: `soak-marker ${n}` })
      count("inbound", res.status, res.body)
      if (res.status === 201) report.messages.push(res.body.data.id)
    },
    send: async () => {
      const res = await call("POST", "/v1/messages/send", { channel_id: channelId, thread_id: threads[n++ % threads.length], text: `reply ${n}` }, { "idempotency-key": `soak-${process.pid}-${n}` })
      count("send", res.status, res.body)
      if (res.status === 201) report.messages.push(res.body.data.id)
    },
    search: async () => {
      const a = await call("GET", "/v1/contacts?search=Soak1&perPage=20")
      count("search", a.status, a.body)
      const b = await call("GET", "/v1/messages/search?q=reply&perPage=20")
      count("search", b.status, b.body)
    }
  }
  const loops = Object.entries(kinds).flatMap(([, run]) =>
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < until) await run().catch((e) => count("error", 599, String(e)))
    }))
  const exports = (async () => {
    while (Date.now() < until) {
      const res = await call("POST", "/v1/exports", { type: "contacts", format: "csv" })
      count("export", res.status, res.body)
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(60_000, until - Date.now()))))
    }
  })()
  await Promise.all([...loops, exports])
  ;(report as { socketEvents: number }).socketEvents = pool.arrivals(0)
  pool.close()
  process.send!(report, () => process.exit(0))
}

// ---------------------------------------------------------------- the app and the samples (this process)

const receiver = () => {
  let received = 0
  const server = createServer((req, res) => {
    req.resume()
    req.on("end", () => {
      received++
      if (Math.random() < 0.2) return void res.writeHead(503).end()
      setTimeout(() => res.writeHead(200).end("ok"), Math.random() * 2_000)
    })
  })
  return new Promise<{ port: number; received: () => number; close: () => void }>((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({ port: (server.address() as { port: number }).port, received: () => received, close: () => server.close() })))
}

const main = async () => {
  if (process.env.DATABASE_URL === undefined) throw new Error("bench/soak.ts needs DATABASE_URL (PostgreSQL)")
  console.log(`soak — ${machine()}, ${SECONDS} s (warm-up ${WARMUP_S} s), ${SOCKETS} sockets, ${CONCURRENCY} loops per kind`)
  const db = await benchDatabase(process.env.DATABASE_URL, "crm_bench_soak")
  const hooks = await receiver()
  const platformKey = `soak-${Math.random().toString(36).slice(2)}`
  const { Option, Redacted } = await import("effect")
  const app = await startInProcess(db.url, "soak", { realtimeDisabled: false, webhookAllowHttp: true, webhookAllowPrivate: true, logLevel: "error", platformApiKey: Option.some(Redacted.make(platformKey)) })
  try {
    const created = await api(app.base, platformKey)("POST", "/platform/v1/companies", {
      name: "Soak",
      plan: "business",
      admin: { email: `soak-${Date.now()}@example.test`, password: "password-123", name: "Soak" }
    })
    if (created.status !== 201) throw new Error(`create company: ${JSON.stringify(created.body)}`)
    const companyId = created.body.data.company.id as number
    const token = created.body.data.token as string
    const hook = await api(app.base, token)("POST", "/v1/integrations", {
      type: "webhook",
      name: "soak",
      status: "active",
      settings: { url: `http://127.0.0.1:${hooks.port}/soak`, selectedEventKeys: ["contact.created"], maxAttempts: 15 }
    })
    if (hook.status !== 201) throw new Error(`create integration: ${JSON.stringify(hook.body)}`)
    const { AppConfig } = await import("../src/platform/Config.ts")
    const { port: realtimePort, appKey } = await app.runInApp(Effect.gen(function*() {
      return { port: (yield* RealtimeGateway).port, appKey: (yield* AppConfig).pusherAppKey }
    }))
    const delay = monitorEventLoopDelay({ resolution: 10 })
    delay.enable()
    const samples: Array<{ t: number; rss: number; heap: number; p99: number }> = []
    const started = Date.now()
    const timer = setInterval(() => {
      const memory = process.memoryUsage()
      samples.push({ t: Math.round((Date.now() - started) / 1000), rss: memory.rss, heap: memory.heapUsed, p99: delay.percentile(99) / 1e6 })
      const s = samples[samples.length - 1]
      console.log(`  t=${s.t}s rss ${(s.rss / 2 ** 20).toFixed(0)} MB heap ${(s.heap / 2 ** 20).toFixed(0)} MB loop p99 ${s.p99.toFixed(1)} ms webhooks received ${hooks.received()}`)
      delay.reset()
    }, SAMPLE_MS)
    const child = fork(fileURLToPath(import.meta.url), [], {
      env: { ...process.env, SOAK_ROLE: "load", SOAK_BASE: app.base, SOAK_TOKEN: token, SOAK_COMPANY: String(companyId), SOAK_RT_PORT: String(realtimePort), SOAK_APP_KEY: appKey },
      execArgv: ["--import", "tsx"]
    })
    const report = await new Promise<LoadReport>((resolve, reject) => {
      child.on("message", (m) => resolve(m as LoadReport))
      child.on("exit", (code) => setTimeout(() => reject(new Error(`load exited with ${code} before its report`)), 2_000))
    })
    clearInterval(timer)
    const contactRows = await runSql<{ n: number }>(db.url, "SELECT count(*)::int AS n FROM contacts WHERE company_id = $1 AND id = ANY($2::bigint[])", [companyId, report.contacts])
    const messageRows = await runSql<{ n: number }>(db.url, "SELECT count(*)::int AS n FROM messages WHERE company_id = $1 AND id = ANY($2::bigint[])", [companyId, report.messages])
    const warm = samples.filter((s) => s.t >= WARMUP_S)
    const heapGrowth = warm.length >= 2 ? (warm[warm.length - 1].heap - warm[0].heap) / warm[0].heap : NaN
    const p99 = Math.max(...warm.map((s) => s.p99))
    const fivexx = Object.entries(report.statuses).filter(([s]) => Number(s) >= 500).reduce((n, [, c]) => n + c, 0)
    console.log(`requests ${JSON.stringify(report.requests)}, statuses ${JSON.stringify(report.statuses)}`)
    console.log(`sockets ${report.sockets}, webhooks received ${hooks.received()}`)
    console.log(`heap after warm-up: ${(heapGrowth * 100).toFixed(1)} % (goal ≤ 5 %); loop delay p99 max ${p99.toFixed(1)} ms (goal ≤ 50); 5xx ${fivexx}`)
    console.log(`acknowledged writes present: contacts ${contactRows[0].n}/${report.contacts.length}, messages ${messageRows[0].n}/${report.messages.length}`)
    for (const line of report.fivexx) console.log(`  5xx: ${line}`)
  } finally {
    await app.close()
    hooks.close()
    await db.drop()
  }
}

if (process.env.SOAK_ROLE === "load") load().catch((e) => {
  console.error(e)
  process.exit(1)
})
else runBench(main)

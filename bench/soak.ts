/**
 * Soak: the app under mixed load for a long time, sampled every 10 s.
 *
 * The app runs in this process on a database of its own (dropped at the end), so its RSS, heap (live, after
 * a full collection) and event-loop delay are what is sampled; the load runs in a child process (this file
 * with SOAK_ROLE=load), all kinds at once:
 * - contact writes, contact and message searches, sends on sandbox threads;
 * - sandbox inbound messages, every other one matching an automation (add-tag → send-message);
 * - a broadcast every SOAK_BROADCAST_EVERY_S to the contacts that automation tagged;
 * - an export a minute;
 * - webhooks for every contact.created to a receiver here that answers after 0–2 s, answers 503 one
 *   request in five, and is down (connections dropped) 15 s out of every 90 s;
 * - SOAK_SOCKETS realtime sockets subscribed to the company's private channel.
 *
 * At the end: every write the API acknowledged is looked up in the database (contacts, messages, one
 * automation run per matching inbound message, every broadcast recipient with a final status, every export
 * finished). Goals: heap after warm-up grows ≤ 5 %; event-loop delay p99 ≤ 50 ms; no 5xx; nothing missing.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/soak.ts
 *   SOAK_MINUTES=5 (default 20), SOAK_WARMUP_S (default a quarter of the run, at most 120), SOAK_SOCKETS=1000,
 *   SOAK_CONCURRENCY=3 (loops per kind of load), SOAK_BROADCAST_EVERY_S=120
 */
import "./support/QuietLogs.ts"
import { fork } from "node:child_process"
import { createServer, type Server } from "node:http"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { api, startInProcess } from "./support/App.ts"
import { benchDatabase, runSql } from "./support/Database.ts"
import { untilNoneLeft } from "../test/support/Processes.ts"
import { runBench, sleep } from "./support/Processes.ts"
import { machine } from "./support/Report.ts"
import { recordResults } from "./support/Results.ts"
import { openPool } from "./support/WsClients.ts"

const SECONDS = Math.round(Number(process.env.SOAK_MINUTES ?? 20) * 60)
const WARMUP_S = Number(process.env.SOAK_WARMUP_S ?? Math.min(120, Math.round(SECONDS / 4)))
const SOCKETS = Number(process.env.SOAK_SOCKETS ?? 1000)
const CONCURRENCY = Number(process.env.SOAK_CONCURRENCY ?? 3)
const BROADCAST_EVERY_S = Number(process.env.SOAK_BROADCAST_EVERY_S ?? 120)
const SAMPLE_MS = 10_000
const AUTO_KEYWORD = "soak-auto"

interface LoadReport {
  readonly requests: Record<string, number>
  readonly statuses: Record<string, number>
  readonly fivexx: Array<string>
  readonly contacts: Array<number>
  readonly messages: Array<number>
  /** Inbound messages whose text matches the automation: each must have started exactly one run. */
  readonly automated: Array<number>
  readonly broadcasts: Array<number>
  readonly exports: Array<number>
  sockets: number
  socketEvents: number
}

type Call = ReturnType<typeof api>

// ---------------------------------------------------------------- the load (child process)

const must = async (call: Call, method: string, path: string, body?: unknown) => {
  const res = await call(method, path, body)
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data
}

/** A sandbox channel with threads to send on, and an automation that tags and answers matching inbound senders. */
const setup = async (call: Call) => {
  const channel = await must(call, "POST", "/v1/channels", { type: "msgr_b", provider: "sandbox", name: "soak" })
  const threads: Array<number> = []
  for (let i = 0; i < 8; i++) {
    const inbound = await must(call, "POST", `/v1/channels/${channel.id}/sandbox/inbound`, { from: { external_id: `soak-${i}`, name: `Soak ${i}` }, text: "hello" })
    threads.push((await must(call, "GET", `/v1/conversations/${inbound.conversation_id}`)).threads[0].id)
  }
  const tag = await must(call, "POST", "/v1/tags", { name: "soak-automated" })
  const automation = await must(call, "POST", "/v1/automations", { name: "soak", status: "draft" })
  await must(call, "PATCH", `/v1/automations/${automation.id}/builder`, {
    nodes: [
      { id: "t", type: "trigger", position: { x: 0, y: 0 } },
      { id: "tag", type: "action", actionId: "add-tag", data: { tag_id: tag.id } },
      { id: "send", type: "action", actionId: "send-message", data: { text: "Thanks, we got it" } }
    ],
    edges: [{ id: "e1", source: "t", target: "tag" }, { id: "e2", source: "tag", target: "send" }],
    triggers: [{ id: "tr", event: "message.created", channelType: "msgr_b", conditionsJoiner: "and", conditions: [{ type: "text_contains", value: AUTO_KEYWORD }] }]
  })
  await must(call, "PATCH", `/v1/automations/${automation.id}`, { status: "active" })
  const segment = await must(call, "POST", "/v1/segments", {
    name: "soak automated",
    conditions: [{ group: 1, type: "tag", operator: "has_any", value: [tag.id] }],
    group_logic: "and"
  })
  return { channelId: channel.id as number, threads, segmentId: segment.id as number }
}

type Setup = Awaited<ReturnType<typeof setup>>

const openSockets = (call: Call) => {
  const channel = `private-company.${process.env.SOAK_COMPANY}`
  return openPool({
    port: Number(process.env.SOAK_RT_PORT),
    path: `/app/${process.env.SOAK_APP_KEY}?protocol=7`,
    sockets: SOCKETS,
    opening: 32,
    marker: "soak-marker",
    maxEvents: 1,
    readyMarker: "pusher_internal:subscription_succeeded",
    failMarker: "pusher:subscription_error",
    greet: async (first) => {
      const socketId = (JSON.parse((JSON.parse(first) as { data: string }).data) as { socket_id: string }).socket_id
      const grant = await call("POST", "/v1/broadcasting/auth", { socket_id: socketId, channel_name: channel })
      // The signature covers channel_data too: a subscribe without it is refused.
      return JSON.stringify({ event: "pusher:subscribe", data: { channel, auth: grant.body.auth, channel_data: grant.body.channel_data } })
    }
  })
}

const kindsOfLoad = (call: Call, ctx: Setup, report: LoadReport, count: (kind: string, status: number, body: unknown) => void) => {
  let n = 0
  return {
    contact: async () => {
      const res = await call("POST", "/v1/contacts", { firstName: `Soak${n++}`, lastName: "Load" })
      count("contact", res.status, res.body)
      if (res.status === 201) report.contacts.push(res.body.data.id)
    },
    inbound: async () => {
      const i = n++
      const automated = i % 2 === 0
      const text = `soak-marker ${i}${automated ? ` ${AUTO_KEYWORD}` : ""}`
      const res = await call("POST", `/v1/channels/${ctx.channelId}/sandbox/inbound`, { from: { external_id: `in-${i % 500}`, name: "Inbound" }, text })
      count("inbound", res.status, res.body)
      if (res.status !== 201) return
      report.messages.push(res.body.data.message_id)
      if (automated) report.automated.push(res.body.data.message_id)
    },
    send: async () => {
      const i = n++
      const res = await call("POST", "/v1/messages/send", { channel_id: ctx.channelId, thread_id: ctx.threads[i % ctx.threads.length], text: `reply ${i}` }, { "idempotency-key": `soak-${process.pid}-${i}` })
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
}

/** `run` every `everyS` seconds until `until`, the first after `firstS`. */
const every = async (firstS: number, everyS: number, until: number, run: () => Promise<void>) => {
  await sleep(firstS * 1000)
  while (Date.now() < until) {
    await run()
    await sleep(Math.max(0, Math.min(everyS * 1000, until - Date.now())))
  }
}

const load = async () => {
  const call = api(process.env.SOAK_BASE!, process.env.SOAK_TOKEN!)
  const report: LoadReport = { requests: {}, statuses: {}, fivexx: [], contacts: [], messages: [], automated: [], broadcasts: [], exports: [], sockets: 0, socketEvents: 0 }
  const count = (kind: string, status: number, body: unknown) => {
    report.requests[kind] = (report.requests[kind] ?? 0) + 1
    report.statuses[status] = (report.statuses[status] ?? 0) + 1
    if (status >= 500 && report.fivexx.length < 20) report.fivexx.push(`${kind} ${status} ${JSON.stringify(body).slice(0, 200)}`)
  }
  const ctx = await setup(call)
  const pool = await openSockets(call)
  report.sockets = pool.size
  process.send!({ started: true })
  const until = Date.now() + SECONDS * 1000
  const kinds = kindsOfLoad(call, ctx, report, count)
  const loops = Object.values(kinds).flatMap((run) =>
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < until) await run().catch((e) => count("error", 599, String(e)))
    }))
  const exports = every(5, 60, until, async () => {
    const res = await call("POST", "/v1/exports", { type: "contacts", format: "csv" })
    count("export", res.status, res.body)
    if (res.status < 300) report.exports.push(res.body.data.export.id)
  })
  const broadcasts = every(Math.min(60, SECONDS / 3), BROADCAST_EVERY_S, until, async () => {
    const res = await call("POST", "/v1/broadcasts", {
      name: `soak ${report.broadcasts.length + 1}`,
      audience: { segmentId: String(ctx.segmentId) },
      channels: { mode: "specific", channelIds: [ctx.channelId] },
      content: { channels: [{ type: "text", channelId: ctx.channelId, text: "Hello {{first_name}}" }] },
      schedule: { mode: "now" }
    })
    count("broadcast", res.status, res.body)
    if (res.status < 300) report.broadcasts.push(res.body.data.id)
  })
  await Promise.all([...loops, exports, broadcasts])
  report.socketEvents = pool.arrivals(0)
  pool.close()
  process.send!(report, () => process.exit(0))
}

// ---------------------------------------------------------------- the app, the receiver, the samples (this process)

/** A webhook receiver that is slow, refuses one request in five, and is down 15 s out of every 90 s. */
const receiver = () => {
  let received = 0
  const started = Date.now()
  const down = () => (Date.now() - started) % 90_000 >= 75_000
  const server: Server = createServer((req, res) => {
    if (down()) return void req.socket.destroy()
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

interface Sample {
  readonly t: number
  readonly rss: number
  readonly heap: number
  readonly p99: number
}

/** RSS, live heap (after a full collection, so garbage does not read as growth) and event-loop delay p99 every 10 s. */
const sampler = (log: (s: Sample) => void) => {
  setFlagsFromString("--expose-gc")
  const gc = runInNewContext("gc") as () => void
  const delay = monitorEventLoopDelay({ resolution: 10 })
  delay.enable()
  const samples: Array<Sample> = []
  const started = Date.now()
  const timer = setInterval(() => {
    const p99 = delay.percentile(99) / 1e6
    gc()
    const memory = process.memoryUsage()
    const sample = { t: Math.round((Date.now() - started) / 1000), rss: memory.rss, heap: memory.heapUsed, p99 }
    samples.push(sample)
    log(sample)
    // The collection above is the sampler's own pause, not the app's.
    delay.reset()
  }, SAMPLE_MS)
  return { samples, sinceStartS: () => Math.round((Date.now() - started) / 1000), stop: () => clearInterval(timer) }
}

const count = async (url: string, statement: string, params: ReadonlyArray<unknown>) => (await runSql<{ n: number }>(url, statement, params))[0].n

/** Every acknowledged write, looked up; broadcasts and exports are given up to 3 minutes to finish. */
const verify = async (url: string, companyId: number, report: LoadReport) => {
  const waitFor = (statement: string, params: ReadonlyArray<unknown>) => untilNoneLeft(() => count(url, statement, params), 180_000, 2_000)
  return {
    contacts: [await count(url, "SELECT count(*)::int AS n FROM contacts WHERE company_id = $1 AND id = ANY($2::bigint[])", [companyId, report.contacts]), report.contacts.length],
    messages: [await count(url, "SELECT count(*)::int AS n FROM messages WHERE company_id = $1 AND id = ANY($2::bigint[])", [companyId, report.messages]), report.messages.length],
    automationRuns: [await count(url, "SELECT count(DISTINCT (context->>'message_id'))::int AS n FROM automation_runs WHERE company_id = $1 AND (context->>'message_id')::bigint = ANY($2::bigint[])", [companyId, report.automated]), report.automated.length],
    automationRunsTwice: await count(url, "SELECT count(*)::int AS n FROM (SELECT 1 FROM automation_runs WHERE company_id = $1 GROUP BY automation_id, context->>'message_id' HAVING count(*) > 1) d", [companyId]),
    recipientsNotFinal: await waitFor("SELECT count(*)::int AS n FROM broadcast_recipients WHERE company_id = $1 AND broadcast_id = ANY($2::bigint[]) AND status IN ('pending', 'sending')", [companyId, report.broadcasts]),
    recipients: await count(url, "SELECT count(*)::int AS n FROM broadcast_recipients WHERE company_id = $1 AND broadcast_id = ANY($2::bigint[])", [companyId, report.broadcasts]),
    exportsNotFinished: await waitFor("SELECT count(*)::int AS n FROM exports WHERE company_id = $1 AND id = ANY($2::bigint[]) AND status IN ('pending', 'processing')", [companyId, report.exports])
  }
}

type Verification = Awaited<ReturnType<typeof verify>>

const goals = (samples: ReadonlyArray<Sample>, loadStartS: number, report: LoadReport, found: Verification) => {
  const warm = samples.filter((s) => s.t >= loadStartS + WARMUP_S)
  const median = (xs: ReadonlyArray<Sample>) => [...xs].map((s) => s.heap).sort((a, b) => a - b)[Math.floor(xs.length / 2)]
  // Three samples at each end: one collection's timing does not decide the verdict.
  const heapGrowth = warm.length >= 6 ? (median(warm.slice(-3)) - median(warm.slice(0, 3))) / median(warm.slice(0, 3)) : NaN
  const p99 = Math.max(...warm.map((s) => s.p99))
  const fivexx = Object.entries(report.statuses).filter(([s]) => Number(s) >= 500).reduce((n, [, c]) => n + c, 0)
  const missing = found.contacts[1] - found.contacts[0] + found.messages[1] - found.messages[0] + found.automationRuns[1] - found.automationRuns[0] +
    found.automationRunsTwice + found.recipientsNotFinal + found.exportsNotFinished
  return {
    heapGrowth: { value: heapGrowth, goal: 0.05, met: heapGrowth <= 0.05 },
    eventLoopP99Ms: { value: p99, goal: 50, met: p99 <= 50 },
    fivexx: { value: fivexx, goal: 0, met: fivexx === 0 },
    missingOrUnfinished: { value: missing, goal: 0, met: missing === 0 }
  }
}

/** The company, its webhook integration, and the realtime port and key the sockets need. */
const prepare = async (app: { base: string; runInApp: <A, E>(e: import("effect").Effect.Effect<A, E, any>) => Promise<A> }, platformKey: string, hookPort: number) => {
  const created = await api(app.base, platformKey)("POST", "/platform/v1/companies", {
    name: "Soak",
    plan: "business",
    admin: { email: `soak-${Date.now()}@example.test`, password: "password-123", name: "Soak" }
  })
  if (created.status !== 201) throw new Error(`create company: ${JSON.stringify(created.body)}`)
  const token = created.body.data.token as string
  await must(api(app.base, token), "POST", "/v1/integrations", {
    type: "webhook",
    name: "soak",
    status: "active",
    settings: { url: `http://127.0.0.1:${hookPort}/soak`, selectedEventKeys: ["contact.created"], maxAttempts: 15 }
  })
  const { Effect } = await import("effect")
  const { AppConfig } = await import("../src/platform/Config.ts")
  const { RealtimeGateway } = await import("../src/realtime/Gateway.ts")
  const realtime = await app.runInApp(Effect.gen(function*() {
    return { port: (yield* RealtimeGateway).port, appKey: (yield* AppConfig).pusherAppKey }
  }))
  return { companyId: created.body.data.company.id as number, token, ...realtime }
}

/** The load in a child process; `onStarted` once its sockets are open and the mixed load begins. */
const runLoad = (env: Record<string, string>, onStarted: () => void) => {
  const child = fork(fileURLToPath(import.meta.url), [], { env: { ...process.env, SOAK_ROLE: "load", ...env }, execArgv: ["--import", "tsx"] })
  return new Promise<LoadReport>((resolve, reject) => {
    child.on("message", (m) => (m as { started?: boolean }).started === true ? onStarted() : resolve(m as LoadReport))
    child.on("exit", (code) => setTimeout(() => reject(new Error(`load exited with ${code} before its report`)), 2_000))
  })
}

const main = async () => {
  if (process.env.DATABASE_URL === undefined) throw new Error("bench/soak.ts needs DATABASE_URL (PostgreSQL)")
  const { Option, Redacted } = await import("effect")
  console.log(`soak — ${machine()}, ${SECONDS} s (warm-up ${WARMUP_S} s), ${SOCKETS} sockets, ${CONCURRENCY} loops per kind`)
  const db = await benchDatabase(process.env.DATABASE_URL, "crm_bench_soak")
  const hooks = await receiver()
  const platformKey = `soak-${Math.random().toString(36).slice(2)}`
  const app = await startInProcess(db.url, "soak", { realtimeDisabled: false, webhookAllowHttp: true, webhookAllowPrivate: true, logLevel: "error", platformApiKey: Option.some(Redacted.make(platformKey)) })
  try {
    const company = await prepare(app, platformKey, hooks.port)
    const sampling = sampler((s) =>
      console.log(`  t=${s.t}s rss ${(s.rss / 2 ** 20).toFixed(0)} MB heap ${(s.heap / 2 ** 20).toFixed(0)} MB loop p99 ${s.p99.toFixed(1)} ms webhooks received ${hooks.received()}`))
    let loadStartS = Number.NaN
    const env = { SOAK_BASE: app.base, SOAK_TOKEN: company.token, SOAK_COMPANY: String(company.companyId), SOAK_RT_PORT: String(company.port), SOAK_APP_KEY: company.appKey }
    const report = await runLoad(env, () => {
      loadStartS = sampling.sinceStartS()
      console.log(`  t=${loadStartS}s sockets open, mixed load begins`)
    })
    sampling.stop()
    const found = await verify(db.url, company.companyId, report)
    const verdict = goals(sampling.samples, loadStartS, report, found)
    const total = Object.values(report.requests).reduce((a, b) => a + b, 0)
    console.log(`requests ${total} ${JSON.stringify(report.requests)}, statuses ${JSON.stringify(report.statuses)}`)
    console.log(`sockets ${report.sockets} (events on the first: ${report.socketEvents}), webhooks received ${hooks.received()}`)
    console.log(`found ${JSON.stringify(found)}`)
    for (const [goal, v] of Object.entries(verdict)) console.log(`  ${v.met ? "met    " : "MISSED "} ${goal}: ${Number.isFinite(v.value) ? Number(v.value.toFixed(4)) : v.value} (goal ${v.goal})`)
    for (const line of report.fivexx) console.log(`  5xx: ${line}`)
    recordResults("soak", { title: `Soak: ${SECONDS / 60} min of mixed load, ${report.sockets} sockets`, x: "s", y: "MB / ms" }, {
      "rss MB": sampling.samples.map((s) => [s.t, s.rss / 2 ** 20]),
      "live heap MB": sampling.samples.map((s) => [s.t, s.heap / 2 ** 20]),
      "event-loop p99 ms": sampling.samples.map((s) => [s.t, s.p99])
    }, { seconds: SECONDS, warmupS: WARMUP_S, loadStartS, sockets: report.sockets, requests: report.requests, statuses: report.statuses, webhooksReceived: hooks.received(), found, verdict })
  } finally {
    await app.close()
    hooks.close()
    await db.drop()
  }
}

if (process.env.SOAK_ROLE === "load") {
  load().catch((e) => {
    console.error(e)
    process.exit(1)
  })
} else runBench(main)

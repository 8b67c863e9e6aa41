/**
 * A WhatsApp channel's pacing across two runners (`CLUSTER=socket`, one fresh database), against the WhatsApp
 * Cloud API fake in this process, which logs when every send arrived:
 *
 *   1. shared budget: a template broadcast to BENCH_PACING_RECIPIENTS (2,000) contacts started through runner A
 *      while BENCH_PACING_API_SENDS (400) `POST /v1/messages/send` go through runner B to other contacts, on
 *      one channel at its default 80/s. Figures: the busiest 1 s sliding window of arrivals (goal ≤ 80), the
 *      rate over the steady part (first arrival + 1 s to last − 1 s; goal ≥ 95 % of 80/s), total, duration;
 *   2. a throttle mid-run: a second broadcast of the same size; once half of it has arrived the fake answers
 *      130429 for 5 s. Figures: every recipient one final status, none accepted twice at the fake, the
 *      busiest window, accepted sends a second before, during and after the throttle (goal after ≥ 95 %).
 *
 * The channel keeps every default (`WHATSAPP_SENDS_PER_SECOND`, `PACING_MARGIN_MS` are removed from the
 * runners' environment; no `sends_per_second` in its settings). Exits 1 when a goal is missed.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:pacing
 */
import "./support/QuietLogs.ts"
import { loadavg } from "node:os"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { WhatsAppFake } from "../test/fakes/WhatsAppFake.ts"
import { freshDatabase } from "../test/support/Databases.ts"
import { busiest } from "../test/support/Windows.ts"
import { type ServerProcess, shardsSettled, spawnServer } from "../test/support/Processes.ts"
import { api } from "./support/App.ts"
import { runBench, sleep } from "./support/Processes.ts"
import { machine } from "./support/Report.ts"
import { recordResults } from "./support/Results.ts"

const RECIPIENTS = Number(process.env.BENCH_PACING_RECIPIENTS ?? 2_000)
const API_SENDS = Number(process.env.BENCH_PACING_API_SENDS ?? 400)
const API_CONTACTS = 50
const API_IN_FLIGHT = 16
const THROTTLE_MS = 5_000
/** WhatsApp Cloud's default throughput per number, and the app's default for it. */
const LIMIT = 80
const USE_GOAL = 0.95

type Arrival = WhatsAppFake["arrivals"][number]
type Rows = <A extends object = any>(text: string, params?: ReadonlyArray<unknown>) => Promise<ReadonlyArray<A>>

const platformKey = `pacing-platform-key-${Math.random().toString(36).slice(2)}`
const wa = new WhatsAppFake()
const cleanups: Array<() => Promise<void>> = []

// ---------------------------------------------------------------- measures


/**
 * The shortest time holding `count` arrivals: any window shorter than this holds fewer. With `LIMIT + 1`
 * it tells how far the arrivals came from the pacer's own window (one second plus the margin, at leaving).
 */
const tightest = (times: ReadonlyArray<number>, count: number) => {
  let best = Infinity
  for (let i = 0; i + count - 1 < times.length; i++) best = Math.min(best, times[i + count - 1] - times[i])
  return best
}

/** Arrivals a second in `[from, to)`. */
const rateIn = (times: ReadonlyArray<number>, from: number, to: number) =>
  to <= from ? NaN : times.filter((t) => t >= from && t < to).length / ((to - from) / 1000)

/** Arrivals per whole second since `origin`: the chart's points. */
const perSecond = (times: ReadonlyArray<number>, origin: number): Array<readonly [number, number]> => {
  const counts = new Map<number, number>()
  for (const t of times) counts.set(Math.floor((t - origin) / 1000), (counts.get(Math.floor((t - origin) / 1000)) ?? 0) + 1)
  const last = Math.max(0, ...counts.keys())
  return Array.from({ length: last + 1 }, (_, s) => [s, counts.get(s) ?? 0] as const)
}

// ---------------------------------------------------------------- setup

const startCluster = async (baseUrl: string) => {
  await wa.http.start()
  cleanups.push(() => wa.http.close())
  const database = await freshDatabase(baseUrl)
  cleanups.push(() => database.drop())
  const db = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(database.url), maxConnections: 2 }).pipe(Layer.orDie))
  cleanups.push(() => db.dispose())
  const rows: Rows = <A extends object>(text: string, params: ReadonlyArray<unknown> = []) =>
    db.runPromise(SqlClient.SqlClient.use((sql) => sql.unsafe<A>(text, params)).pipe(Effect.orDie))
  const env = {
    DATABASE_URL: database.url,
    CLUSTER: "socket",
    PLATFORM_API_KEY: platformKey,
    WHATSAPP_API_BASE: wa.http.url,
    RATE_LIMIT_PER_WINDOW: "1000000000",
    METRICS_PORT: "0",
    // The defaults are under test: nothing inherited may raise them.
    WHATSAPP_SENDS_PER_SECOND: undefined,
    PACING_MARGIN_MS: undefined
  }
  const runners: Array<ServerProcess> = []
  cleanups.push(() => Promise.all(runners.map((r) => r.stop(5_000))).then(() => {}))
  // One after the other: the first runs the migrations on the empty database.
  for (const name of ["runner-a", "runner-b"]) runners.push(await spawnServer(name, env, { readyTimeoutMs: 180_000 }))
  await shardsSettled((text) => rows(text), 2)
  return { runners, rows }
}

const expectStatus = (what: string, res: { status: number; body: any }, status: number) => {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

/** A company, its WhatsApp Cloud channel (connected to the fake, default throughput) and an approved template. */
const setupCompany = async (base: string) => {
  const created = expectStatus("company", await api(base, platformKey)("POST", "/platform/v1/companies", {
    name: "Pacing bench",
    plan: "business",
    admin: { email: `pacing-${Date.now()}@example.test`, password: "password-123", name: "Bench" }
  }), 201)
  const token = created.data.token as string
  const call = api(base, token)
  const credentials = {
    access_token: `EAApacing${Date.now()}`,
    phone_number_id: "106540352242922",
    business_account_id: "102290129340398",
    app_secret: "pacing-app-secret",
    verify_token: "verify"
  }
  wa.tokens.add(credentials.access_token)
  const channel = expectStatus("channel", await call("POST", "/v1/channels", { type: "msgr_a_business", provider: "whatsapp_cloud", name: "WA", credentials }), 201)
  const template = expectStatus("template", await call("POST", "/v1/templates", {
    channel_type: "msgr_a_business",
    channel_ids: [channel.data.id],
    name: "Order update",
    language: "en",
    category: "utility",
    body: "Hi {{first_name}}, your order {{order_id}} has shipped.",
    parameters: [{ name: "first_name", type: "text", sample_value: "Ann" }, { name: "order_id", type: "text", sample_value: "A-42" }]
  }), 201).data.template
  const submitted = expectStatus("submit", await call("POST", `/v1/templates/${template.id}/submit`), 200)
  wa.decide(submitted.data.template.external_id, "APPROVED")
  // Sync runs as a job: the template is sendable once its verdict is read back.
  expectStatus("sync", await call("POST", "/v1/templates/sync"), 202)
  for (let tries = 0; (await call("GET", `/v1/templates/${template.id}`)).body?.data?.meta_status !== "approved"; tries++) {
    if (tries > 120) throw new Error("the template sync did not approve the template")
    await sleep(250)
  }
  return { companyId: created.data.company.id as number, token, channelId: channel.data.id as number, groupId: template.template_group_id as number, credentials }
}

/** `count` contacts with a WhatsApp account `<prefix><n>`, tagged, and a segment of the tag. */
const audience = async (rows: Rows, call: ReturnType<typeof api>, companyId: number, count: number, prefix: string) => {
  const tag = expectStatus("tag", await call("POST", "/v1/tags", { name: `pacing ${prefix}` }), 201).data.id as number
  await rows(
    `WITH c AS (INSERT INTO contacts (company_id, first_name, display_name) SELECT $1, 'C' || g, 'C' || g FROM generate_series(1, $2) g RETURNING id),
     t AS (INSERT INTO contact_tags (company_id, contact_id, tag_id) SELECT $1, id, $3 FROM c)
     INSERT INTO contact_accounts (company_id, contact_id, channel_type, external_id) SELECT $1, id, 'msgr_a_business', $4 || id FROM c`,
    [companyId, count, tag, prefix]
  )
  await rows("ANALYZE contacts, contact_tags, contact_accounts")
  const segment = expectStatus("segment", await call("POST", "/v1/segments", {
    name: `pacing ${prefix}`,
    conditions: [{ group: 1, type: "tag", operator: "has_any", value: [tag] }],
    group_logic: "and"
  }), 201)
  return String(segment.data.id)
}

/** Contacts who wrote to the number (inbound webhooks), so that their 24-hour window is open for API sends. */
const inboundContacts = async (rows: Rows, base: string, company: Awaited<ReturnType<typeof setupCompany>>) => {
  const numbers = Array.from({ length: API_CONTACTS }, (_, i) => String(4420_0000_000 + i))
  for (const from of numbers) {
    const payload = WhatsAppFake.notification(company.credentials.phone_number_id, {
      contacts: [{ profile: { name: `Api ${from}` }, wa_id: from }],
      messages: [{ from, id: `wamid.IN${from}`, timestamp: String(Math.floor(Date.now() / 1000)), type: "text", text: { body: "hello" } }]
    })
    const signed = WhatsAppFake.signed(company.credentials.app_secret, payload)
    const res = await fetch(`${base}/hooks/whatsapp/${company.channelId}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-hub-signature-256": signed.signature },
      body: signed.body
    })
    if (res.status !== 200) throw new Error(`inbound hook: ${res.status} ${await res.text()}`)
  }
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const [{ n }] = await rows<{ n: number }>(
      "SELECT count(*)::int AS n FROM threads WHERE company_id = $1 AND channel_id = $2 AND last_inbound_at IS NOT NULL",
      [company.companyId, company.channelId]
    )
    if (n >= API_CONTACTS) return numbers
    await sleep(250)
  }
  throw new Error("the inbound messages did not open their threads within 60 s")
}

const startBroadcast = async (call: ReturnType<typeof api>, company: Awaited<ReturnType<typeof setupCompany>>, segmentId: string, name: string) => {
  const created = expectStatus("broadcast", await call("POST", "/v1/broadcasts", {
    name,
    audience: { segmentId },
    channels: { mode: "specific", channelIds: [company.channelId] },
    content: { channels: [{ type: "template", channelId: company.channelId, templateId: company.groupId, language: "en", variables: { order_id: "A-42" } }] },
    schedule: { mode: "now" }
  }), 201)
  return created.data.runs[0].id as number
}

/** Waits until the run has left `processing`; answers its recipients' statuses. */
const runDone = async (rows: Rows, runId: number, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const [run] = await rows<{ status: string }>("SELECT status FROM broadcast_runs WHERE id = $1", [runId])
    if (run.status !== "processing") break
    await sleep(250)
  }
  const counts = await rows<{ status: string; n: number }>("SELECT status, count(*)::int AS n FROM broadcast_recipients WHERE run_id = $1 GROUP BY status", [runId])
  return Object.fromEntries(counts.map((c) => [c.status, c.n])) as Record<string, number>
}

// ---------------------------------------------------------------- the two measures

interface Goal {
  readonly name: string
  readonly value: string
  readonly met: boolean
}

const line = (goal: Goal) => `  ${goal.met ? "met   " : "MISSED"}  ${goal.name.padEnd(56)} ${goal.value}`

const sharedBudget = async (rows: Rows, runners: ReadonlyArray<ServerProcess>, company: Awaited<ReturnType<typeof setupCompany>>, numbers: ReadonlyArray<string>) => {
  const viaA = api(runners[0].url, company.token)
  const viaB = api(runners[1].url, company.token)
  const segmentId = await audience(rows, viaA, company.companyId, RECIPIENTS, "4471")
  const from = wa.arrivals.length
  const statuses = new Map<number, number>()
  let next = 0
  const apiSender = async () => {
    while (next < API_SENDS) {
      const i = next++
      const res = await viaB("POST", "/v1/messages/send", { channel_id: company.channelId, to: { external_id: numbers[i % numbers.length] }, text: `api ${i}` }, {
        "idempotency-key": `pacing-api-${i}`
      }).catch(() => ({ status: 0, body: undefined }))
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
    }
  }
  const runId = await startBroadcast(viaA, company, segmentId, "pacing shared")
  await Promise.all(Array.from({ length: API_IN_FLIGHT }, apiSender))
  const recipients = await runDone(rows, runId, 120_000)
  // API sends answered 503 past the request deadline go on; wait for their arrivals too.
  const expected = RECIPIENTS + API_SENDS
  const deadline = Date.now() + 30_000
  while (wa.arrivals.length - from < expected && Date.now() < deadline) await sleep(250)
  const arrivals = wa.arrivals.slice(from)
  const times = arrivals.map((a) => a.at)
  const first = times[0]
  const last = times[times.length - 1]
  const window = busiest(times, 1_000)
  const steady = rateIn(times, first + 1_000, last - 1_000)
  const apiArrived = arrivals.filter((a) => numbers.includes(a.to)).length
  const figures = {
    scenario: "shared budget",
    arrivals: arrivals.length,
    broadcast: arrivals.length - apiArrived,
    api: apiArrived,
    apiStatuses: Object.fromEntries(statuses),
    recipients,
    throttled: arrivals.filter((a) => a.status !== 200).length,
    busiestWindow: window,
    tightest81Ms: tightest(times, LIMIT + 1),
    steadyRate: steady,
    used: steady / LIMIT,
    durationS: (last - first) / 1000
  }
  const goals: Array<Goal> = [
    { name: "busiest 1 s window of arrivals ≤ 80", value: `${window} (81 within ${tightest(times, LIMIT + 1)} ms)`, met: window <= LIMIT },
    { name: "steady rate ≥ 95 % of 80/s", value: `${steady.toFixed(1)}/s (${(100 * steady / LIMIT).toFixed(1)} %)`, met: steady >= USE_GOAL * LIMIT },
    { name: `every send arrived once (${RECIPIENTS} + ${API_SENDS})`, value: String(arrivals.length), met: arrivals.length === expected },
    { name: "every recipient sent", value: JSON.stringify(recipients), met: recipients.sent === RECIPIENTS }
  ]
  return { figures, goals, points: perSecond(times, first) }
}

const throttledMidRun = async (rows: Rows, runners: ReadonlyArray<ServerProcess>, company: Awaited<ReturnType<typeof setupCompany>>) => {
  const viaA = api(runners[0].url, company.token)
  const segmentId = await audience(rows, viaA, company.companyId, RECIPIENTS, "4472")
  const from = wa.arrivals.length
  const runId = await startBroadcast(viaA, company, segmentId, "pacing throttled")
  const halfBy = Date.now() + 120_000
  while (wa.arrivals.length - from < RECIPIENTS / 2) {
    if (Date.now() > halfBy) throw new Error(`half of the broadcast did not arrive within 120 s: ${wa.arrivals.length - from}`)
    await sleep(5)
  }
  const throttleFrom = Date.now()
  wa.throttleUntil = throttleFrom + THROTTLE_MS
  const recipients = await runDone(rows, runId, 180_000)
  const arrivals = wa.arrivals.slice(from)
  const accepted = arrivals.filter((a) => a.status === 200)
  const times = arrivals.map((a) => a.at)
  const acceptedTimes = accepted.map((a) => a.at)
  const first = times[0]
  const last = acceptedTimes[acceptedTimes.length - 1]
  const throttleTo = wa.throttleUntil
  const byRecipient = new Map<string, number>()
  for (const a of accepted) byRecipient.set(a.to, (byRecipient.get(a.to) ?? 0) + 1)
  const twice = [...byRecipient.values()].filter((n) => n > 1).length
  const [{ rows: recipientRows, final, distinct }] = await rows<{ rows: number; final: number; distinct: number }>(
    `SELECT count(*)::int AS rows, count(*) FILTER (WHERE status NOT IN ('pending', 'sending'))::int AS final, count(DISTINCT contact_id)::int AS distinct
     FROM broadcast_recipients WHERE run_id = $1`,
    [runId]
  )
  const before = rateIn(acceptedTimes, first + 1_000, throttleFrom)
  const during = rateIn(times, throttleFrom, throttleTo)
  const after = rateIn(acceptedTimes, throttleTo + 1_000, last - 1_000)
  const resumedMs = (acceptedTimes.find((t) => t >= throttleTo) ?? NaN) - throttleTo
  const window = busiest(times, 1_000)
  const figures = {
    scenario: "throttle mid-run",
    arrivals: arrivals.length,
    accepted: accepted.length,
    throttled: arrivals.length - accepted.length,
    recipients,
    recipientRows,
    final,
    deliveredTwice: twice,
    busiestWindow: window,
    tightest81Ms: tightest(times, LIMIT + 1),
    beforeRate: before,
    attemptsDuringRate: during,
    afterRate: after,
    firstAcceptedAfterThrottleMs: resumedMs,
    durationS: (last - first) / 1000
  }
  const goals: Array<Goal> = [
    { name: "every recipient one final status", value: `${final} final of ${recipientRows} rows, ${distinct} contacts`, met: final === RECIPIENTS && recipientRows === RECIPIENTS && distinct === RECIPIENTS },
    { name: "every recipient sent", value: JSON.stringify(recipients), met: recipients.sent === RECIPIENTS },
    { name: "none accepted twice at the fake", value: `${twice} twice; ${byRecipient.size} recipients accepted`, met: twice === 0 && byRecipient.size === RECIPIENTS },
    { name: "busiest 1 s window of arrivals (throttled ones too) ≤ 80", value: `${window} (81 within ${tightest(times, LIMIT + 1)} ms)`, met: window <= LIMIT },
    { name: "rate after the throttle ≥ 95 % of 80/s", value: `${after.toFixed(1)}/s`, met: after >= USE_GOAL * LIMIT }
  ]
  return { figures, goals, points: perSecond(acceptedTimes, first), throttledPoints: perSecond(arrivals.filter((a) => a.status !== 200).map((a) => a.at), first) }
}

// ---------------------------------------------------------------- main

const main = async () => {
  if (process.env.DATABASE_URL === undefined) {
    console.log("bench/pacing needs PostgreSQL: set DATABASE_URL. Skipped.")
    return
  }
  console.log(`pacing — ${machine()}; load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`)
  const started = Date.now()
  const { runners, rows } = await startCluster(process.env.DATABASE_URL)
  const company = await setupCompany(runners[0].url)
  const [{ settings }] = await rows<{ settings: Record<string, unknown> }>("SELECT settings FROM channels WHERE id = $1", [company.channelId])
  if (settings.sends_per_second !== undefined || settings.provider_throughput !== undefined) throw new Error(`the channel's settings raise its rate: ${JSON.stringify(settings)}`)
  const numbers = await inboundContacts(rows, runners[1].url, company)
  console.log(`  two runners ready, channel ${company.channelId} at its default ${LIMIT}/s, ${numbers.length} contacts with an open window (${((Date.now() - started) / 1000).toFixed(0)} s)`)

  const shared = await sharedBudget(rows, runners, company, numbers)
  console.log(`\n1. broadcast of ${RECIPIENTS} through runner A, ${API_SENDS} API sends through runner B (${API_IN_FLIGHT} in flight), one channel`)
  console.log(`   ${shared.figures.arrivals} arrivals (${shared.figures.broadcast} broadcast, ${shared.figures.api} API) in ${shared.figures.durationS.toFixed(1)} s; API answers ${JSON.stringify(shared.figures.apiStatuses)}`)
  for (const goal of shared.goals) console.log(line(goal))
  const chart = { title: "WhatsApp pacing, two runners, one channel at 80/s", x: "s since the first send", y: "sends arrived in that second" }
  recordResults("pacing", chart, { "1. shared budget": shared.points }, { ...shared.figures, goals: shared.goals })

  const throttle = await throttledMidRun(rows, runners, company)
  const f = throttle.figures
  console.log(`\n2. broadcast of ${RECIPIENTS}; the fake answers 130429 for ${THROTTLE_MS / 1000} s once half has arrived`)
  console.log(`   ${f.accepted} accepted, ${f.throttled} answered 130429, in ${f.durationS.toFixed(1)} s; recipients ${JSON.stringify(f.recipients)}`)
  console.log(`   accepted/s before ${f.beforeRate.toFixed(1)}, attempts/s during ${f.attemptsDuringRate.toFixed(1)}, accepted/s after ${f.afterRate.toFixed(1)}; first accepted ${f.firstAcceptedAfterThrottleMs} ms after the throttle ended`)
  for (const goal of throttle.goals) console.log(line(goal))
  recordResults("pacing", chart, { "2. accepted": throttle.points, "2. answered 130429": throttle.throttledPoints }, { ...f, goals: throttle.goals })
  console.log(`\n  whole bench ${((Date.now() - started) / 1000).toFixed(0)} s`)
  if ([...shared.goals, ...throttle.goals].some((g) => !g.met)) process.exitCode = 1
}

runBench(main, async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch((error) => console.error(error))
})

/**
 * Webhook delivery: the app (a child process, `src/main.ts`, PostgreSQL) delivers to a local receiver in
 * this process, for 20 integrations (one per company, every one subscribed to `contact.created`).
 *
 * 1. Burst: `BENCH_BURST` events (default 50k, spread over the 20 companies) inserted in one statement,
 *    numbered by the app's sequencer sweep; deliveries/s from the first to the last delivery.
 * 2. Steady: `BENCH_RATE` contacts created per second through the API (default 500) for `BENCH_SECONDS`;
 *    commit-to-first-attempt = receipt time − the event's `created_at` (its insert, just before commit).
 * 3. Outage: the receiver answers 503 for `BENCH_OUTAGE_S` s (default 60) while `BENCH_OUTAGE_RATE`
 *    contacts/s (default 50) are created, then 200 again; drain time = from the receiver's return to
 *    the last first-success. The retry schedule is the production one (5 s, 30 s, 2 min, …).
 *
 * Checked before any figure is printed: every event reached its integration (nothing lost) and no
 * webhook-id was received again after the receiver had answered it 2xx (nothing delivered twice).
 *
 *   DATABASE_URL=postgres://… npx tsx bench/webhooks.ts
 */
import { cpSync, readFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { api, type AppProcess, startApp } from "./support/App.ts"
import { Effect, ManagedRuntime } from "effect"
import { SqlClient } from "effect/sql"
import { noticeChannel } from "../src/platform/Notices.ts"
import { benchDatabase, pgLayer, runSql } from "./support/Database.ts"
import { runBench, sleep, workspace } from "./support/Processes.ts"
import { machine, summary } from "./support/Report.ts"
import { recordResults } from "./support/Results.ts"

const INTEGRATIONS = 20
const BURST = Number(process.env.BENCH_BURST ?? 50_000)
const RATE = Number(process.env.BENCH_RATE ?? 500)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20)
const OUTAGE_S = Number(process.env.BENCH_OUTAGE_S ?? 60)
const OUTAGE_RATE = Number(process.env.BENCH_OUTAGE_RATE ?? 50)
/** Where the steady and outage events come from: `events` (another runner's appends) or `api` (contacts created through the API). */
const STEADY = process.env.BENCH_STEADY ?? "events"
const ws = workspace("crm-bench-webhooks-")

// ---------------------------------------------------------------- receiver

interface Seen {
  path: string
  eventId: number
  firstAt: number
  createdAt: number
  succeeded: boolean
}

const receiver = () => {
  const seen = new Map<string, Seen>()
  let up = true
  let duplicatesAfterSuccess = 0
  let requests = 0
  let lastFirstSuccessAt = 0
  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      requests++
      const now = Date.now()
      const key = `${req.url}|${req.headers["webhook-id"]}`
      let entry = seen.get(key)
      if (entry === undefined) {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        entry = { path: req.url ?? "", eventId: Number(String(req.headers["webhook-id"]).slice(4)), firstAt: now, createdAt: Date.parse(body.created_at), succeeded: false }
        seen.set(key, entry)
      } else if (entry.succeeded) duplicatesAfterSuccess++
      if (up) {
        if (!entry.succeeded) lastFirstSuccessAt = now
        entry.succeeded = true
        res.writeHead(200).end()
      } else res.writeHead(503).end()
    })
  })
  return {
    listen: () => new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port))),
    seen,
    setUp: (value: boolean) => {
      up = value
    },
    stats: () => ({ requests, duplicatesAfterSuccess, lastFirstSuccessAt }),
    succeeded: () => [...seen.values()].filter((s) => s.succeeded).length,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

// ---------------------------------------------------------------- helpers

let counter = 0
const company = async (app: AppProcess) => {
  const unique = `${Date.now().toString(36)}-${counter++}-${process.pid}`
  const created = await api(app.base, app.platformKey)("POST", "/platform/v1/companies", {
    name: `Bench ${unique}`,
    plan: "business",
    admin: { email: `bench-${unique}@example.test`, password: "password-123", name: "Bench" }
  })
  if (created.status !== 201) throw new Error(`create company: ${created.status} ${JSON.stringify(created.body)}`)
  return { id: created.body.data.company.id as number, token: created.body.data.token as string }
}

const waitUntil = async (what: string, done: () => boolean, timeoutMs: number) => {
  const deadline = Date.now() + timeoutMs
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`)
    await sleep(50)
  }
}

/**
 * Appends events at `rate`/s as another runner of the app would: numbered by the company's counter and
 * announced on the events channel in the same statement (a NOTIFY carrying the event, as
 * src/events/Repo.ts sends it). One statement at a time appends every event due by then, so the rate holds
 * however slow a statement is. The app under test only delivers: the API's own cost (500 contacts/s is
 * more than a shared 2-core machine serves) stays out of the delivery figure.
 */
const appendEvents = async (url: string, companies: ReadonlyArray<{ id: number }>, rate: number, seconds: number) => {
  const runtime = ManagedRuntime.make(pgLayer(url, 1))
  const total = Math.round(rate * seconds)
  const started = Date.now()
  let appended = 0
  try {
    while (appended < total) {
      const due = Math.min(total, Math.floor(((Date.now() - started) * rate) / 1000))
      if (due === appended) {
        await sleep(2)
        continue
      }
      const counts = new Map<number, number>()
      for (let i = appended; i < due; i++) {
        const id = companies[i % companies.length].id
        counts.set(id, (counts.get(id) ?? 0) + 1)
      }
      const batch = JSON.stringify([...counts].map(([company, k]) => ({ company, k })))
      await runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql`
          WITH n AS (SELECT * FROM jsonb_to_recordset(${batch}::jsonb) AS n(company bigint, k int)),
          c AS (
            UPDATE companies SET event_seq = event_seq + n.k FROM n WHERE companies.id = n.company
            RETURNING companies.id, companies.event_seq - n.k AS base, n.k
          ), e AS (
            INSERT INTO events (company_id, seq, key, payload, created_at)
            SELECT c.id, c.base + g, 'contact.created', jsonb_build_object('steady', true, 'n', g),
              date_trunc('milliseconds', clock_timestamp())
            FROM c, generate_series(1, c.k) g RETURNING company_id, seq, key, payload, created_at
          )
          SELECT pg_notify(${noticeChannel}, json_build_object('n', 'bench', 'c', company_id, 'i', seq, 'e', json_build_object(
            'seq', seq, 'event', key, 'company_id', company_id,
            'occurred_at', to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'data', payload))::text) FROM e`))
      appended = due
    }
    return { created: total, sendingMs: Date.now() - started }
  } finally {
    await runtime.dispose()
  }
}

/** Creates contacts at `rate`/s for `seconds` s (open loop); answers how many were created. */
const createContacts = async (app: AppProcess, companies: ReadonlyArray<{ token: string }>, rate: number, seconds: number) => {
  const total = Math.round(rate * seconds)
  const started = Date.now()
  const pending: Array<Promise<number>> = []
  const apiMs: Array<number> = []
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate
    const wait = due - Date.now()
    if (wait > 0) await sleep(wait)
    const c = companies[i % companies.length]
    // The server drops idle keep-alive sockets after 5 s; a request that met one is sent again once.
    const send = () => {
      const t = Date.now()
      return api(app.base, c.token)("POST", "/v1/contacts", { firstName: `C${i}` }).then((r) => {
        apiMs.push(Date.now() - t)
        return r.status
      })
    }
    pending.push(send().catch(() => send()).catch(() => 0))
  }
  const statuses = await Promise.all(pending)
  const created = statuses.filter((s) => s === 201).length
  if (created !== total) throw new Error(`only ${created} of ${total} contacts were created: ${[...new Set(statuses)]}`)
  return { created, sendingMs: Date.now() - started, api: summary(apiMs) }
}

/** CPU time (user + system, ms) of the app and of the database's server processes: far less sensitive to load than wall time. */
const cpu = async (app: AppProcess, url: string) => {
  const ticks = (pid: number | undefined) => {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
      return Number(fields[11]) + Number(fields[12])
    } catch {
      return 0
    }
  }
  const backends = await runSql<{ pid: number }>(url, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
  return { app: ticks(app.pid) * 10, db: backends.reduce((sum, b) => sum + ticks(b.pid), 0) * 10 }
}

// ---------------------------------------------------------------- main

const main = async () => {
  const base = process.env.DATABASE_URL
  if (base === undefined) throw new Error("bench/webhooks.ts needs DATABASE_URL (PostgreSQL)")
  console.log(`webhook delivery bench — ${machine()}`)
  const db = await benchDatabase(base, "crm_bench_webhooks")
  const rx = receiver()
  const port = await rx.listen()
  process.env.WEBHOOK_ALLOW_PRIVATE = "true"
  process.env.WEBHOOK_ALLOW_HTTP = "true"
  process.env.REALTIME_DISABLED = "true"
  const app = await startApp(ws, { mode: "server", databaseUrl: db.url, dataDir: ws.dir, logLevel: "warn", profile: process.env.BENCH_PROFILE === "true" })
  try {
    const companies = []
    for (let i = 0; i < INTEGRATIONS; i++) {
      const c = await company(app)
      const hook = await api(app.base, c.token)("POST", "/v1/integrations", {
        type: "webhook",
        name: `bench ${i}`,
        status: "active",
        settings: { url: `http://127.0.0.1:${port}/i/${i}`, selectedEventKeys: ["contact.created"], maxAttempts: 15 }
      })
      if (hook.status !== 201) throw new Error(`create integration: ${hook.status} ${JSON.stringify(hook.body)}`)
      companies.push(c)
    }
    // The worker learns of new integrations on its next poll.
    await sleep(1_500)

    // 1. Burst
    const ids = companies.map((c) => c.id).join(",")
    const cpuBefore = await cpu(app, db.url)
    const burstStart = Date.now()
    await runSql(db.url, `
      INSERT INTO events (company_id, key, payload, created_at)
      SELECT c, 'contact.created', jsonb_build_object('contact_id', n, 'burst', true), date_trunc('milliseconds', now())
      FROM generate_series(1, ${BURST}) n, LATERAL (SELECT (ARRAY[${ids}])[1 + n % ${INTEGRATIONS}] AS c) x`)
    const inserted = Date.now()
    await waitUntil("the burst", () => rx.succeeded() >= BURST, 600_000)
    const cpuAfter = await cpu(app, db.url)
    const firsts = [...rx.seen.values()].map((s) => s.firstAt)
    const first = Math.min(...firsts)
    const last = Math.max(...firsts)
    console.log(`burst: ${BURST} events over ${INTEGRATIONS} integrations, inserted in ${inserted - burstStart} ms`)
    console.log(`  first delivery ${first - inserted} ms after the insert (the sequencer's sweep numbers rows written outside the app after ~1 s)`)
    console.log(`  ${BURST} deliveries in ${((last - first) / 1000).toFixed(1)} s: ${Math.round(BURST / ((last - first) / 1000))} deliveries/s`)
    const perK = (ms: number) => ((ms / BURST) * 1000).toFixed(0)
    console.log(`  CPU per 1,000 deliveries: app ${perK(cpuAfter.app - cpuBefore.app)} ms, PostgreSQL ${perK(cpuAfter.db - cpuBefore.db)} ms (capacity on one free core: ${
      Math.round(BURST / ((cpuAfter.app - cpuBefore.app) / 1000))} deliveries/s for the app)`)

    // 2. Steady
    const before = rx.seen.size
    const steadyStart = Date.now()
    const steadyRun: { created: number; sendingMs: number; api?: ReturnType<typeof summary> } = STEADY === "api"
      ? await createContacts(app, companies, RATE, SECONDS)
      : await appendEvents(db.url, companies, RATE, SECONDS)
    const steady = steadyRun.created
    await waitUntil("the steady deliveries", () => rx.succeeded() >= BURST + steady, 120_000)
    const latencies = [...rx.seen.values()].filter((s) => s.firstAt >= steadyStart).map((s) => s.firstAt - s.createdAt)
    const l = summary(latencies)
    console.log(`steady: ${steady} ${STEADY === "api" ? "contacts created through the API" : "events appended by another runner"} at ${RATE}/s (${rx.seen.size - before} deliveries)`)
    console.log(`  commit-to-first-attempt p50 ${l.p50} ms, p95 ${l.p95} ms, p99 ${l.p99} ms, max ${l.max} ms`)
    console.log(`  sent in ${(steadyRun.sendingMs / 1000).toFixed(1)} s${steadyRun.api !== undefined ? `; API answer p50 ${steadyRun.api.p50} ms, p99 ${steadyRun.api.p99} ms` : ""}`)
    // Where the time goes: event insert → its outbox row (numbering, wake-up, claim) → first request.
    const rows = await runSql<{ event_id: string; path: string; made: Date; created: Date }>(db.url, `
      SELECT d.event_id, regexp_replace(i.settings->>'url', '^https?://[^/]+', '') AS path, d.created_at AS made, e.created_at AS created
      FROM webhook_deliveries d JOIN events e ON e.id = d.event_id JOIN integrations i ON i.id = d.integration_id
      WHERE e.created_at >= $1::timestamptz`, [new Date(steadyStart).toISOString()])
    const made = new Map(rows.map((r) => [`${r.path}|${r.event_id}`, new Date(r.made).getTime() - new Date(r.created).getTime()]))
    const toRow: Array<number> = []
    const toAttempt: Array<number> = []
    for (const s of rx.seen.values()) {
      if (s.firstAt < steadyStart) continue
      const m = made.get(`${s.path}|${s.eventId}`)
      if (m === undefined) continue
      toRow.push(m)
      toAttempt.push(s.firstAt - s.createdAt - m)
    }
    const a = summary(toRow)
    const b = summary(toAttempt)
    console.log(`  event → outbox row p50 ${a.p50} ms, p99 ${a.p99} ms; outbox row → first attempt p50 ${b.p50} ms, p99 ${b.p99} ms`)
    recordResults("webhooks", { title: `Webhooks at ${RATE} events/s: commit to first attempt`, x: "percentile", y: "ms", logY: true }, { "commit → first attempt": [[50, l.p50], [95, l.p95], [99, l.p99]], "event → outbox row": [[50, a.p50], [99, a.p99]], "outbox row → first attempt": [[50, b.p50], [99, b.p99]] }, { burst: BURST, rate: RATE, seconds: SECONDS, steady: l, eventToRow: a, rowToAttempt: b })

    // 3. Outage
    const expected = BURST + steady + Math.round(OUTAGE_RATE * OUTAGE_S)
    rx.setUp(false)
    const outage = (STEADY === "api" ? await createContacts(app, companies, OUTAGE_RATE, OUTAGE_S) : await appendEvents(db.url, companies, OUTAGE_RATE, OUTAGE_S)).created
    rx.setUp(true)
    const back = Date.now()
    await waitUntil("the backlog", () => rx.succeeded() >= BURST + steady + outage, 900_000)
    const { duplicatesAfterSuccess, lastFirstSuccessAt, requests } = rx.stats()
    console.log(`outage: receiver answered 503 for ${OUTAGE_S} s while ${outage} events were written`)
    console.log(`  drain: every event delivered ${((lastFirstSuccessAt - back) / 1000).toFixed(1)} s after the receiver came back`)
    await sleep(3_000)
    const final = rx.stats()
    const lost = expected - rx.succeeded()
    console.log(`checks: ${rx.succeeded()} of ${expected} events delivered (lost ${lost}); ${final.duplicatesAfterSuccess} deliveries after a success; ${requests} requests in all`)
    if (lost !== 0 || final.duplicatesAfterSuccess !== 0 || duplicatesAfterSuccess !== 0) throw new Error("delivery check failed")
  } finally {
    await app.stop()
    if (process.env.BENCH_PROFILE === "true") {
      const out = process.env.BENCH_PROFILE_OUT ?? "/tmp/webhooks-profile"
      cpSync(app.profDir, out, { recursive: true })
      console.log(`profile: ${out}`)
    }
    await rx.close()
    await db.drop().catch((error) => console.error("could not drop the bench database", error))
  }
}

void runBench(main, ws.cleanup)

/**
 * The operator's inbox at 100k conversations in one company: p50/p95/p99 per filter mix of
 * - SQL alone: one list request's statements (`ConversationsRepo.list` and `.counts`, run together as
 *   `Conversations.list` runs them: the page of 20 with assignee, team, last message and the caller's
 *   unread count, and the meta counts), plus each statement's EXPLAIN ANALYZE execution time;
 * - HTTP: `GET /v1/conversations` with the same filters, as the caller, through the whole app
 *   (authentication, channel access, both statements, JSON) running in this process.
 * Unread counts come from the conversation row's inbound counter and the caller's read marks; the
 * counts from the count groups (migration 0235), folded before timing as the app's sweep folds them.
 * No message is read per request, so the messages table is left empty here.
 *
 * Data (generated on the server, then ANALYZE): BENCH_INBOX_CONVERSATIONS conversations of as many
 * contacts over 3 channels; status 40 % open, 10 % pending, 45 % resolved, 5 % snoozed; a third
 * unassigned, the rest over 10 members (the caller among them); priority on one in five; the caller
 * has read 70 % up to their last message. Each probe's answer is checked against a plain count
 * before timing, on both paths.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/inbox.ts      a fresh database on that server, dropped at the end
 *   BENCH_INBOX_CONVERSATIONS=100000 BENCH_INBOX_ROUNDS=200
 */
import { Effect, Option } from "effect"
import { SqlClient, Statement } from "effect/sql"
import { CompanyId } from "../src/auth/Domain.ts"
import { Tokens } from "../src/auth/Tokens.ts"
import { foldCounts } from "../src/conversations/CountFold.ts"
import { ConversationsRepo, type ListPlan } from "../src/conversations/Repo.ts"
import { runMigrations } from "../src/platform/Migrations.ts"
import { startInProcess } from "./support/App.ts"
import { benchDatabase, runLikeApp, runOn } from "./support/Database.ts"
import { recordResults } from "./support/Results.ts"
import { runBench } from "./support/Processes.ts"
import { fmtMs, machine, summary } from "./support/Report.ts"

const CONVERSATIONS = Number(process.env.BENCH_INBOX_CONVERSATIONS ?? 100_000)
const ROUNDS = Number(process.env.BENCH_INBOX_ROUNDS ?? 200)
/** `BENCH_INBOX_PLANS=1` prints each statement's plan; `BENCH_INBOX_HTTP=0` skips the HTTP rounds. */
const PLANS = process.env.BENCH_INBOX_PLANS === "1"
const HTTP = process.env.BENCH_INBOX_HTTP !== "0"
process.env.LOG_LEVEL ??= "warn"

if (!process.env.DATABASE_URL) {
  console.log("bench/inbox needs PostgreSQL: set DATABASE_URL (a database is created on that server). Skipped.")
  process.exit(0)
}
const serverUrl = process.env.DATABASE_URL

const generate = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // This connection reads int8 as text: ids are converted.
  const [{ id: companyText }] = yield* sql<{ id: string }>`INSERT INTO companies (name, plan) VALUES ('inbox bench', 'business') RETURNING id`
  const companyId = Number(companyText)
  const users = yield* sql<{ id: number }>`
    INSERT INTO users (email, name, current_company_id)
    SELECT 'bench' || i || '@example.test', 'Member ' || i, ${companyId} FROM generate_series(1, 10) i RETURNING id`
  yield* sql`INSERT INTO memberships (company_id, user_id, role) SELECT ${companyId}, id, 'admin' FROM users WHERE id = ANY(${`{${users.map((u) => u.id).join(",")}}`}::bigint[])`
  const channels = yield* sql<{ id: number }>`
    INSERT INTO channels (company_id, type, provider, name, webhook_secret)
    SELECT ${companyId}, 'msgr_b', 'sandbox', 'Channel ' || i, 'secret' FROM generate_series(1, 3) i RETURNING id`
  const channelIds = channels.map((c) => Number(c.id))
  const userIds = users.map((u) => Number(u.id))
  yield* sql.unsafe(`
    INSERT INTO contacts (company_id, first_name, last_name, display_name)
    SELECT ${companyId}, 'First' || i, 'Last' || i, 'Contact ' || i FROM generate_series(1, ${CONVERSATIONS}) i`)
  yield* sql.unsafe(`
    INSERT INTO conversations (company_id, contact_id, last_message_at, status, snoozed_until, priority, assigned_user_id,
      last_message_id, last_message_direction, last_message_type, last_message_preview, last_message_timestamp, inbound_count, channel_ids)
    SELECT ${companyId}, c.id, now() - (random() * interval '90 days'),
      CASE WHEN r < 0.40 THEN 'open' WHEN r < 0.50 THEN 'pending' WHEN r < 0.95 THEN 'resolved' ELSE 'snoozed' END,
      CASE WHEN r >= 0.95 THEN now() + interval '1 day' END,
      CASE WHEN random() < 0.2 THEN (array['low','medium','high','urgent'])[1 + floor(random() * 4)::int] END,
      CASE WHEN random() < 0.33 THEN NULL ELSE (array[${userIds.join(",")}])[1 + floor(random() * ${userIds.length})::int] END,
      c.id, 'inbound', 'text', 'hello, is my order on its way?', now(), 1 + floor(random() * 5)::int,
      array[(array[${channelIds.join(",")}])[1 + floor(random() * ${channelIds.length})::int]]::bigint[]
    FROM (SELECT id, random() AS r FROM contacts WHERE company_id = ${companyId}) c`)
  yield* sql.unsafe(`
    INSERT INTO conversation_reads (company_id, conversation_id, user_id, last_read_message_id, read_inbound_count, caught_up)
    SELECT ${companyId}, id, ${userIds[0]}, last_message_id, inbound_count, true FROM conversations
    WHERE company_id = ${companyId} AND random() < 0.7`)
  yield* sql`ANALYZE`
  return { companyId: CompanyId.make(companyId), userId: userIds[0], channelIds }
})

type Data = Effect.Success<typeof generate>

interface Probe {
  readonly name: string
  readonly filters: ListPlan["filters"]
  /** The same filters as the query of `GET /v1/conversations`. */
  readonly query: string
  /** The matching conversations, as a plain condition on `conversations`. */
  readonly check: string
}

const probesOf = (data: Data): ReadonlyArray<Probe> => {
  const unread = `inbound_count > 0 AND NOT EXISTS (SELECT 1 FROM conversation_reads r
    WHERE r.conversation_id = conversations.id AND r.user_id = ${data.userId} AND r.caught_up)`
  const channel = data.channelIds[0]
  return [
    { name: "all", filters: {}, query: "", check: "true" },
    { name: "status=open", filters: { status: "open" }, query: "status=open", check: "status = 'open'" },
    { name: "status=open&assignee=me", filters: { status: "open", assignee: "me" }, query: "status=open&assignee=me", check: `status = 'open' AND assigned_user_id = ${data.userId}` },
    { name: "status=open&assignee=unassigned", filters: { status: "open", assignee: "unassigned" }, query: "status=open&assignee=unassigned", check: "status = 'open' AND assigned_user_id IS NULL" },
    { name: "status=open&unread=true", filters: { status: "open", unread: "true" }, query: "status=open&unread=true", check: `status = 'open' AND ${unread}` },
    { name: "unread=true", filters: { unread: "true" }, query: "unread=true", check: unread },
    { name: "status=open&assignee=me&unread=true", filters: { status: "open", assignee: "me", unread: "true" }, query: "status=open&assignee=me&unread=true", check: `status = 'open' AND assigned_user_id = ${data.userId} AND ${unread}` },
    { name: "priority=urgent", filters: { priority: "urgent" }, query: "priority=urgent", check: "priority = 'urgent'" },
    { name: "channel_id (one of 3)", filters: { channel_id: channel }, query: `channel_id=${channel}`, check: `${channel} = ANY (channel_ids)` },
    { name: "q=contact 4242", filters: { q: "contact 4242" }, query: "q=contact%204242", check: "contact_id IN (SELECT id FROM contacts WHERE search_text LIKE '%contact 4242%')" }
  ]
}

interface Row {
  readonly name: string
  readonly matching: number
  readonly sql: ReturnType<typeof summary>
  /** EXPLAIN ANALYZE execution time of the list statement and of the counts statement. */
  readonly explained: ReadonlyArray<number>
  http?: ReturnType<typeof summary>
}

/** Runs `once`, capturing the statements it executes, then EXPLAIN ANALYZEs each: their execution times. */
const explain = (once: Effect.Effect<unknown, never, SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const captured: Array<readonly [string, ReadonlyArray<unknown>]> = []
    const capture: Statement.Transformer = (self) => Effect.sync(() => (captured.push(self.compile()), self))
    yield* Effect.provideService(once, Statement.CurrentTransformer, capture)
    const times: Array<number> = []
    for (const [text, params] of captured) {
      if (PLANS) {
        const lines = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, [...params])
        console.log(lines.map((line) => line["QUERY PLAN"]).join("\n"))
      }
      const [row] = yield* sql.unsafe<{ "QUERY PLAN": unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, [...params])
      const plan = typeof row["QUERY PLAN"] === "string" ? JSON.parse(row["QUERY PLAN"]) : row["QUERY PLAN"]
      times.push((plan as Array<{ "Execution Time": number }>)[0]["Execution Time"])
    }
    return times
  })

const sqlRounds = (data: Data, probes: ReadonlyArray<Probe>) =>
  Effect.gen(function*() {
    const repo = yield* ConversationsRepo
    const sql = yield* SqlClient.SqlClient
    const rows: Array<Row> = []
    for (const probe of probes) {
      const plan: ListPlan = { userId: data.userId, channelIds: data.channelIds, filters: probe.filters, after: Option.none(), offset: 0, limit: 20 }
      const [{ n }] = yield* sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM conversations WHERE company_id = ${data.companyId} AND ${probe.check}`)
      const once = Effect.all([repo.list(data.companyId, plan), repo.counts(data.companyId, plan)], { concurrency: 2 })
      const [page, counts] = yield* once
      if (counts.total !== n || page.items.length !== Math.min(20, n)) {
        return yield* Effect.die(new Error(`${probe.name}: counted ${counts.total} and listed ${page.items.length}, expected ${n}`))
      }
      const samples: Array<number> = []
      for (let i = 0; i < ROUNDS; i++) {
        const t = performance.now()
        yield* once
        samples.push(performance.now() - t)
      }
      if (PLANS) console.log(`\n--- ${probe.name}`)
      rows.push({ name: probe.name, matching: n, sql: summary(samples), explained: yield* explain(once) })
    }
    return rows
  }).pipe(Effect.provide(ConversationsRepo.layer))

const httpRounds = async (url: string, data: Data, probes: ReadonlyArray<Probe>, rows: ReadonlyArray<Row>) => {
  const app = await startInProcess(url, "bench/inbox")
  try {
    const token = (await app.runInApp(Tokens.use((t) => t.issueMobileToken(data.userId, "bench")))).plaintext
    const get = async (query: string) => {
      const res = await fetch(`${app.base}/v1/conversations?${query}`, { headers: { authorization: `Bearer ${token}`, accept: "application/json" } })
      const body = (await res.json()) as { data: { pagination: { total: number }; items: Array<unknown> } }
      if (res.status !== 200) throw new Error(`GET /v1/conversations?${query}: ${res.status} ${JSON.stringify(body)}`)
      return body
    }
    for (const [i, probe] of probes.entries()) {
      const body = await get(probe.query)
      if (body.data.pagination.total !== rows[i].matching) {
        throw new Error(`${probe.name} over HTTP: total ${body.data.pagination.total}, expected ${rows[i].matching}`)
      }
      const samples: Array<number> = []
      for (let round = 0; round < ROUNDS; round++) {
        const t = performance.now()
        await get(probe.query)
        samples.push(performance.now() - t)
      }
      rows[i].http = summary(samples)
    }
  } finally {
    await app.close()
  }
}

const main = async () => {
  console.log(`bench/inbox — ${new Date().toISOString()} — ${machine()}`)
  const { drop, url } = await benchDatabase(serverUrl, "crm_bench_inbox")
  try {
    await runOn(url, runMigrations)
    const started = performance.now()
    const data = await runOn(url, generate)
    console.log(`generated ${CONVERSATIONS} conversations in ${((performance.now() - started) / 1000).toFixed(1)} s`)
    const folded = await runLikeApp(url, foldCounts.pipe(Effect.provide(ConversationsRepo.layer)))
    await runOn(url, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // As autovacuum does after a fold this large (the deltas table's own settings, migration 0235).
      yield* sql`VACUUM ANALYZE conversation_count_deltas`
      yield* sql`ANALYZE`
    }))
    console.log(`folded ${folded} count deltas`)
    const probes = probesOf(data)
    const rows = await runLikeApp(url, sqlRounds(data, probes))
    if (HTTP) await httpRounds(url, data, probes, rows)
    console.log(`\n${ROUNDS} rounds each; SQL: page of 20 + meta counts, sequential rounds; EXPLAIN: execution time of the list and counts statements`)
    console.log(`${"probe".padEnd(38)} ${"total".padStart(7)}  SQL p50 SQL p95 SQL p99  EXPLAIN list/counts  HTTP p50 HTTP p95 HTTP p99`)
    for (const row of rows) {
      const explained = row.explained.map((t) => t.toFixed(2)).join(" / ").padStart(19)
      const http = row.http === undefined ? "" : `${fmtMs(row.http.p50)}  ${fmtMs(row.http.p95)}  ${fmtMs(row.http.p99)}`
      console.log(`${row.name.padEnd(38)} ${String(row.matching).padStart(7)} ${fmtMs(row.sql.p50)} ${fmtMs(row.sql.p95)} ${fmtMs(row.sql.p99)}  ${explained}  ${http}`)
    }
    recordResults(
      "inbox",
      { title: `The inbox list at ${CONVERSATIONS} conversations: p95 against conversations matching`, x: "matching", y: "p95 ms", logX: true, scatter: true },
      {
        "SQL p95": rows.map((row) => [row.matching, row.sql.p95, row.name] as const),
        ...(HTTP ? { "HTTP p95": rows.flatMap((row) => row.http === undefined ? [] : [[row.matching, row.http.p95, row.name] as const]) } : {})
      },
      rows
    )
  } finally {
    await drop()
  }
}

await runBench(main)

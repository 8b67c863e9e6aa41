/**
 * The operator's inbox at 100k conversations in one company: p50/p95/p99 of one list request's
 * statements (`ConversationsRepo.list` and `.counts`, run together as `Conversations.list` runs them:
 * the page of 20 with assignee, team, last message and the caller's unread count, and the meta
 * counts), per filter. Unread counts come from the conversation row's inbound counter minus the
 * caller's read mark: no message is read per request, so the messages table is left empty here.
 *
 * Data (generated on the server, then ANALYZE): BENCH_INBOX_CONVERSATIONS conversations of as many
 * contacts over 3 channels; status 40 % open, 10 % pending, 45 % resolved, 5 % snoozed; a third
 * unassigned, the rest over 10 members (the caller among them); priority on one in five; the caller
 * has read 70 %. Each probe's answer is checked against a plain count before timing.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/inbox.ts      a fresh database on that server, dropped at the end
 *   BENCH_INBOX_CONVERSATIONS=100000 BENCH_INBOX_ROUNDS=200
 */
import { Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId } from "../src/auth/Domain.ts"
import { ConversationsRepo, type ListPlan } from "../src/conversations/Repo.ts"
import { runMigrations } from "../src/platform/Migrations.ts"
import { benchDatabase, runLikeApp, runOn } from "./support/Database.ts"
import { runBench } from "./support/Processes.ts"
import { fmtMs, machine, summary } from "./support/Report.ts"

const CONVERSATIONS = Number(process.env.BENCH_INBOX_CONVERSATIONS ?? 100_000)
const ROUNDS = Number(process.env.BENCH_INBOX_ROUNDS ?? 200)
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
    INSERT INTO users (email, name) SELECT 'bench' || i || '@example.test', 'Member ' || i FROM generate_series(1, 10) i RETURNING id`
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
    INSERT INTO conversation_reads (company_id, conversation_id, user_id, last_read_message_id, read_inbound_count)
    SELECT ${companyId}, id, ${userIds[0]}, last_message_id, inbound_count FROM conversations
    WHERE company_id = ${companyId} AND random() < 0.7`)
  yield* sql`ANALYZE`
  return { companyId: CompanyId.make(companyId), userId: userIds[0], channelIds }
})

const main = async () => {
  console.log(`bench/inbox — ${new Date().toISOString()} — ${machine()}`)
  const { drop, url } = await benchDatabase(serverUrl, "crm_bench_inbox")
  try {
    await runOn(url, runMigrations)
    const started = performance.now()
    const data = await runOn(url, generate)
    console.log(`generated ${CONVERSATIONS} conversations in ${((performance.now() - started) / 1000).toFixed(1)} s`)
    const base = { userId: data.userId, channelIds: data.channelIds, after: Option.none(), offset: 0, limit: 20 } as const
    const probes: ReadonlyArray<readonly [string, ListPlan, string]> = [
      ["all", { ...base, filters: {} }, "true"],
      ["status=open", { ...base, filters: { status: "open" } }, "status = 'open'"],
      ["status=open&assignee=me", { ...base, filters: { status: "open", assignee: "me" } }, `status = 'open' AND assigned_user_id = ${data.userId}`],
      ["status=open&assignee=unassigned", { ...base, filters: { status: "open", assignee: "unassigned" } }, "status = 'open' AND assigned_user_id IS NULL"],
      ["status=open&unread=true", { ...base, filters: { status: "open", unread: "true" } }, `status = 'open' AND inbound_count > COALESCE((SELECT read_inbound_count FROM conversation_reads r WHERE r.conversation_id = conversations.id AND r.user_id = ${data.userId}), 0)`],
      ["priority=urgent", { ...base, filters: { priority: "urgent" } }, "priority = 'urgent'"],
      [`channel_id (one of 3)`, { ...base, filters: { channel_id: data.channelIds[0] } }, `${data.channelIds[0]} = ANY (channel_ids)`],
      ["q=contact 4242", { ...base, filters: { q: "contact 4242" } }, "contact_id IN (SELECT id FROM contacts WHERE search_text LIKE '%contact 4242%')"]
    ]
    await runLikeApp(url, Effect.gen(function*() {
      const repo = yield* ConversationsRepo
      const sql = yield* SqlClient.SqlClient
      console.log(`\n${"probe".padEnd(34)} ${"total".padStart(7)}  p50 ms  p95 ms  p99 ms  max ms   (${ROUNDS} rounds: page of 20 + meta counts)`)
      for (const [name, plan, check] of probes) {
        const [{ n }] = yield* sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM conversations WHERE company_id = ${data.companyId} AND ${check}`)
        const once = Effect.all([repo.list(data.companyId, plan), repo.counts(data.companyId, plan)], { concurrency: 2 })
        const [page, counts] = yield* once
        if (counts.total !== n || page.items.length !== Math.min(20, n)) {
          return yield* Effect.die(new Error(`${name}: counted ${counts.total} and listed ${page.items.length}, expected ${n}`))
        }
        const samples: Array<number> = []
        for (let i = 0; i < ROUNDS; i++) {
          const t = performance.now()
          yield* once
          samples.push(performance.now() - t)
        }
        const s = summary(samples)
        console.log(`${name.padEnd(34)} ${String(n).padStart(7)} ${fmtMs(s.p50)} ${fmtMs(s.p95)} ${fmtMs(s.p99)} ${fmtMs(s.max)}`)
      }
    }).pipe(Effect.provide(ConversationsRepo.layer)))
  } finally {
    await drop()
  }
}

await runBench(main)

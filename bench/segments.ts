/**
 * Segment estimate at 1M contacts: p50/p95 of the compiled count (`Compiler.memberCount`, run
 * `.unprepared` as `SegmentsRepo.count` runs it for POST /v1/segments/estimate) for five condition
 * mixes in the biggest company, next to a hand-written SQL count of the same mix, in the same run,
 * on the app's own client (`SqlLayer`: pool, int8 as numbers). Both answers are compared before
 * timing; then compiled and hand-written runs alternate.
 *
 * Data (generated on the server with INSERT … SELECT): BENCH_SEGMENTS_CONTACTS contacts over
 * BENCH_SEGMENTS_COMPANIES companies whose sizes follow Zipf (s = 1.1: the biggest ≈ 23 %),
 * inserted in random order (a company's rows are spread over the table as live traffic spreads
 * them); 1 % soft-deleted, 4 % opted out, 1 % blocked; created over two years; custom fields
 * `plan` (free 60 %, pro 25 %, business 10 %, trial 5 %) and `city`; 20 tags per company with
 * Zipf-like popularity (tag k on 35 %/k^0.9 of contacts, ≈ 1.4 tags per contact); one linked
 * account per contact; 3 channels per company; a conversation for 70 % of contacts (last message
 * skewed towards recent: now − 365 d · u²), one thread on a channel (60/30/10 %) and a second on
 * another channel for 20 %, with a last inbound time on 75 % of threads. The messages table is
 * not filled: no segment condition reads it (conversations and threads carry the times).
 *
 *   DATABASE_URL=postgres://… npx tsx bench/segments.ts   a fresh database on that server, dropped at the end
 *   BENCH_SEGMENTS_DB=name        use (and keep) that database; generated once, reused on later runs
 *   BENCH_SEGMENTS_CONTACTS=1000000 BENCH_SEGMENTS_COMPANIES=100 BENCH_SEGMENTS_RUNS=40
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as os from "node:os"
import { CompanyId } from "../src/auth/Domain.ts"
import { runMigrations } from "../src/platform/Migrations.ts"
import { memberCount, parse } from "../src/segments/Compiler.ts"
import type { ConditionInput, GroupLogic } from "../src/segments/Domain.ts"
import { benchDatabase, runLikeApp, runOn } from "./support/Database.ts"
import { runBench } from "./support/Processes.ts"
import { fmtMs, summary } from "./support/Report.ts"
import { recordResults } from "./support/Results.ts"

const CONTACTS = Number(process.env.BENCH_SEGMENTS_CONTACTS ?? 1_000_000)
const COMPANIES = Number(process.env.BENCH_SEGMENTS_COMPANIES ?? 100)
const RUNS = Number(process.env.BENCH_SEGMENTS_RUNS ?? 40)
const ZIPF = 1.1

process.env.LOG_LEVEL ??= "warn"

if (!process.env.DATABASE_URL) {
  console.log("bench/segments needs PostgreSQL: set DATABASE_URL (a database is created on that server). Skipped.")
  process.exit(0)
}
const serverUrl = process.env.DATABASE_URL


// ---------------------------------------------------------------- data

const generation = [
  "SET jit = off",
  "SET synchronous_commit = off",
  "SET maintenance_work_mem = '512MB'",
  "SET work_mem = '256MB'",
  "SET enable_nestloop = off",
  // Generated rows reference rows generated just before: foreign-key triggers off for the load only.
  "SET session_replication_role = replica",
  `CREATE TABLE bench_segments_companies AS
   WITH made AS (
     INSERT INTO companies (name, plan) SELECT 'bench-segments-' || lpad(r::text, 3, '0'), 'business' FROM generate_series(1, ${COMPANIES}) r
     RETURNING id, name
   )
   SELECT id AS company_id, substr(name, 16)::int AS rank, 1 / power(substr(name, 16)::int, ${ZIPF}) AS weight FROM made`,
  // Secondary indexes are dropped for the load and built again afterwards (a sort instead of a
  // million random insertions each); constraint indexes stay.
  `CREATE TABLE bench_segments_indexes AS
   SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def
   FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
   WHERE t.relname IN ('contacts', 'contact_tags', 'contact_accounts', 'conversations', 'threads')
     AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`,
  `DO $$ DECLARE r record; BEGIN
     FOR r IN SELECT name FROM bench_segments_indexes LOOP EXECUTE 'DROP INDEX ' || r.name; END LOOP;
   END $$`,
  `INSERT INTO contacts (company_id, first_name, last_name, display_name, status, created_at, opted_out_at, blocked_at,
                         deleted_at, custom_fields)
   SELECT company_id, first_name, last_name, first_name || ' ' || last_name, 'active', created_at,
          CASE WHEN u1 < 0.04 THEN created_at END, CASE WHEN u1 >= 0.04 AND u1 < 0.05 THEN created_at END,
          CASE WHEN u2 < 0.01 THEN now() END,
          jsonb_build_object(
            'plan', CASE WHEN u3 < 0.60 THEN 'free' WHEN u3 < 0.85 THEN 'pro' WHEN u3 < 0.95 THEN 'business' ELSE 'trial' END,
            'city', (array['almaty','astana','moscow','berlin','london','tashkent'])[1 + (g % 6)])
   FROM (
     SELECT c.company_id, g,
            (array['Anna','Ivan','Maria','Oleg','John','Kate','Пётр','Ольга','Сергей','Елена'])[1 + g % 10] AS first_name,
            (array['Smith','Petrov','Иванова','Brown','Кузнецов','Lee','Соколова','Miller'])[1 + (g / 10) % 8] AS last_name,
            now() - random() * interval '730 days' AS created_at, random() AS u1, random() AS u2, random() AS u3
     FROM bench_segments_companies c,
          generate_series(1, greatest(20, (${CONTACTS} * c.weight / (SELECT sum(weight) FROM bench_segments_companies))::int)) g
     ORDER BY random()
   ) x`,
  `CREATE TEMP TABLE bench_contacts AS
   SELECT c.id, c.company_id FROM contacts c JOIN bench_segments_companies b ON b.company_id = c.company_id`,
  "ANALYZE bench_contacts",
  `INSERT INTO tags (company_id, name) SELECT company_id, 'tag-' || k FROM bench_segments_companies, generate_series(1, 20) k`,
  `CREATE TABLE bench_segments_tags AS
   SELECT t.company_id, t.id AS tag_id, substr(t.name, 5)::int AS rank FROM tags t
   JOIN bench_segments_companies b ON b.company_id = t.company_id`,
  "CREATE UNIQUE INDEX ON bench_segments_tags (company_id, rank)",
  "ANALYZE bench_segments_tags",
  // One draw per (contact, rank): c.id in the qual keeps it there; a volatile qual on k alone is
  // pushed down to the series and drawn once per rank.
  `INSERT INTO contact_tags (company_id, contact_id, tag_id)
   SELECT x.company_id, x.id, t.tag_id
   FROM (SELECT c.company_id, c.id, k FROM bench_contacts c, generate_series(1, 20) k
         WHERE random() + 0 * c.id < 0.35 / power(k, 0.9)) x
   JOIN bench_segments_tags t ON t.company_id = x.company_id AND t.rank = x.k`,
  `INSERT INTO channels (company_id, type, provider, name, webhook_secret)
   SELECT company_id, t, 'sandbox', 'bench ' || t, 'bench-secret'
   FROM bench_segments_companies, unnest(array['msgr_a', 'msgr_b', 'msgr_c_business']) t`,
  `CREATE TABLE bench_segments_channels AS
   SELECT company_id, array_agg(id ORDER BY id) AS ids FROM channels
   WHERE company_id IN (SELECT company_id FROM bench_segments_companies) GROUP BY 1`,
  `INSERT INTO contact_accounts (company_id, contact_id, channel_type, external_id)
   SELECT company_id, id, (array['msgr_a', 'msgr_b', 'msgr_c_business'])[1 + id % 3], 'ext-' || id FROM bench_contacts`,
  `INSERT INTO conversations (company_id, contact_id, last_message_at)
   SELECT company_id, id, now() - power(random(), 2) * interval '365 days' FROM bench_contacts WHERE random() < 0.7`,
  `INSERT INTO threads (company_id, conversation_id, channel_id, contact_account_id, last_inbound_at)
   SELECT v.company_id, v.id, ch.ids[CASE WHEN u < 0.6 THEN 1 WHEN u < 0.9 THEN 2 ELSE 3 END], a.id,
          CASE WHEN random() < 0.75 THEN v.last_message_at - random() * interval '3 days' END
   FROM (SELECT v.*, random() AS u FROM conversations v
         WHERE v.company_id IN (SELECT company_id FROM bench_segments_companies)) v
   JOIN bench_segments_channels ch ON ch.company_id = v.company_id
   JOIN contact_accounts a ON a.contact_id = v.contact_id`,
  `INSERT INTO threads (company_id, conversation_id, channel_id, last_inbound_at)
   SELECT t.company_id, t.conversation_id, ch.ids[1 + (array_position(ch.ids, t.channel_id) % 3)],
          CASE WHEN random() < 0.75 THEN now() - power(random(), 2) * interval '365 days' END
   FROM threads t JOIN bench_segments_channels ch ON ch.company_id = t.company_id
   WHERE random() < 0.2`,
  // The trigram index on names serves contact search, never a segment: not rebuilt.
  `DO $$ DECLARE r record; BEGIN
     FOR r IN SELECT def FROM bench_segments_indexes WHERE name <> 'contacts_search_idx' LOOP EXECUTE r.def; END LOOP;
   END $$`,
  "SET session_replication_role = origin",
  "RESET enable_nestloop",
  "VACUUM ANALYZE contacts",
  "VACUUM ANALYZE contact_tags",
  "VACUUM ANALYZE conversations",
  "VACUUM ANALYZE threads",
  "VACUUM ANALYZE contact_accounts",
  "CREATE TABLE bench_segments_meta (generated_at timestamptz)",
  "INSERT INTO bench_segments_meta VALUES (now())"
]

const generate = (url: string) =>
  runOn(url, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const statement of generation) {
      const started = performance.now()
      yield* sql.unsafe(statement)
      const ms = performance.now() - started
      if (ms > 1000) console.log(`  ${(ms / 1000).toFixed(1).padStart(6)} s  ${statement.replace(/\s+/g, " ").slice(0, 90)}`)
    }
  }).pipe(Effect.orDie))

// ---------------------------------------------------------------- mixes

interface Ids {
  readonly company: number
  readonly tags: ReadonlyArray<number>
  readonly channels: ReadonlyArray<number>
}

interface Mix {
  readonly name: string
  readonly groupLogic: GroupLogic
  readonly conditions: ReadonlyArray<ConditionInput>
  /** What a developer would write for the same audience (values bound as well). */
  readonly hand: (sql: SqlClient.SqlClient, ids: Ids) => Effect.Effect<ReadonlyArray<{ readonly count: number }>, unknown>
}

const mixes = (ids: Ids): ReadonlyArray<Mix> => [
  {
    name: "one tag (tag-3)",
    groupLogic: "and",
    conditions: [{ type: "tag", operator: "has_any", value: [ids.tags[2]] }],
    hand: (sql) =>
      sql<{ count: number }>`
        SELECT count(*)::int AS count FROM contact_tags ct JOIN contacts c ON c.id = ct.contact_id
        WHERE ct.company_id = ${ids.company} AND ct.tag_id = ${ids.tags[2]} AND c.deleted_at IS NULL`.unprepared
  },
  {
    name: "tag AND channel",
    groupLogic: "and",
    conditions: [
      { type: "tag", operator: "has_any", value: [ids.tags[0]] },
      { type: "channel", operator: "in", value: [ids.channels[1]] }
    ],
    hand: (sql) =>
      sql<{ count: number }>`
        SELECT count(*)::int AS count FROM contacts c
        JOIN contact_tags ct ON ct.contact_id = c.id AND ct.tag_id = ${ids.tags[0]}
        WHERE c.company_id = ${ids.company} AND c.deleted_at IS NULL
          AND EXISTS (SELECT 1 FROM conversations cv JOIN threads t ON t.conversation_id = cv.id
                      WHERE cv.contact_id = c.id AND t.channel_id = ${ids.channels[1]} AND NOT t.is_group)`.unprepared
  },
  {
    name: "OR of two groups",
    groupLogic: "or",
    conditions: [
      { group: 1, type: "tag", operator: "has_any", value: [ids.tags[1]] },
      { group: 1, type: "status", operator: "is", value: "active" },
      { group: 2, type: "channel", operator: "in", value: [ids.channels[2]] }
    ],
    hand: (sql) =>
      sql<{ count: number }>`
        SELECT count(*)::int AS count FROM contacts c
        WHERE c.company_id = ${ids.company} AND c.deleted_at IS NULL
          AND ((c.id IN (SELECT ct.contact_id FROM contact_tags ct WHERE ct.tag_id = ${ids.tags[1]})
                AND c.opted_out_at IS NULL AND c.blocked_at IS NULL)
            OR c.id IN (SELECT cv.contact_id FROM conversations cv JOIN threads t ON t.conversation_id = cv.id
                        WHERE t.channel_id = ${ids.channels[2]} AND NOT t.is_group))`.unprepared
  },
  {
    name: "last message within 30 days",
    groupLogic: "and",
    conditions: [{ type: "date", operator: "within_last_days", value: 30, field_name: "last_message_at" }],
    hand: (sql) =>
      sql<{ count: number }>`
        SELECT count(*)::int AS count FROM conversations cv JOIN contacts c ON c.id = cv.contact_id
        WHERE cv.company_id = ${ids.company} AND cv.last_message_at >= now() - interval '30 days' AND c.deleted_at IS NULL`.unprepared
  },
  {
    name: "custom field plan = pro",
    groupLogic: "and",
    conditions: [{ type: "custom", operator: "is", value: "pro", field_name: "plan" }],
    hand: (sql) =>
      sql<{ count: number }>`
        SELECT count(*)::int AS count FROM contacts c
        WHERE c.company_id = ${ids.company} AND c.deleted_at IS NULL AND c.custom_fields ->> 'plan' = ${"pro"}`.unprepared
  }
]

const compiled = (companyId: number, mix: Mix) => {
  const parsed = parse(mix.conditions)
  if (parsed._tag === "Invalid") throw new Error(`${mix.name}: ${JSON.stringify(parsed.errors)}`)
  return memberCount(CompanyId.make(companyId), { type: "dynamic", groupLogic: mix.groupLogic, rules: parsed.rules }).pipe(
    Effect.flatMap((statement) => statement.unprepared)
  )
}

const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const started = performance.now()
    const value = yield* effect
    return [performance.now() - started, value] as const
  })

// ---------------------------------------------------------------- main

const main = async () => {
  const { name, url, drop } = await benchDatabase(serverUrl, "crm_bench_segments", process.env.BENCH_SEGMENTS_DB)
  const version = await runOn(url, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [v] = yield* sql<{ version: string; shared_buffers: string; work_mem: string }>`
      SELECT current_setting('server_version') AS version, current_setting('shared_buffers') AS shared_buffers,
             current_setting('work_mem') AS work_mem`
    return v
  }).pipe(Effect.orDie))
  console.log(`bench/segments — ${os.cpus().length} × ${os.cpus()[0]?.model.trim()}, ${Math.round(os.totalmem() / 2 ** 30)} GB, Node ${process.version}`)
  console.log(`  PostgreSQL ${version.version} (shared_buffers ${version.shared_buffers}, work_mem ${version.work_mem}), database ${name}`)
  try {
    await runOn(url, runMigrations)
    const generated = await runOn(url, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'bench_segments_meta'`
      return rows[0].n > 0
    }).pipe(Effect.orDie))
    if (!generated) {
      const started = performance.now()
      await generate(url)
      console.log(`  generated in ${((performance.now() - started) / 1000).toFixed(0)} s`)
    } else console.log("  reusing the generated data")

    await runLikeApp(url, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const sizes = yield* sql<{ company_id: number; n: number }>`
        SELECT b.company_id, count(c.id)::int AS n FROM bench_segments_companies b
        LEFT JOIN contacts c ON c.company_id = b.company_id AND c.deleted_at IS NULL GROUP BY 1 ORDER BY 2 DESC`
      const total = sizes.reduce((sum, c) => sum + c.n, 0)
      const [rows] = yield* sql<{ tags: number; accounts: number; conversations: number; threads: number }>`
        SELECT (SELECT count(*)::int FROM contact_tags) AS tags, (SELECT count(*)::int FROM contact_accounts) AS accounts,
               (SELECT count(*)::int FROM conversations) AS conversations, (SELECT count(*)::int FROM threads) AS threads`
      console.log(
        `  ${total.toLocaleString("en")} live contacts over ${sizes.length} companies (Zipf s=${ZIPF}); biggest ` +
          `${sizes.slice(0, 3).map((c) => c.n.toLocaleString("en")).join(", ")}; median ${sizes[sizes.length >> 1].n.toLocaleString("en")}; ` +
          `smallest ${sizes[sizes.length - 1].n}`
      )
      console.log(
        `  ${rows.tags.toLocaleString("en")} contact tags, ${rows.accounts.toLocaleString("en")} accounts, ` +
          `${rows.conversations.toLocaleString("en")} conversations, ${rows.threads.toLocaleString("en")} threads`
      )
      const company = sizes[0].company_id
      const tags = (yield* sql<{ tag_id: number }>`
        SELECT tag_id FROM bench_segments_tags WHERE company_id = ${company} ORDER BY rank`).map((r) => r.tag_id)
      const [channels] = yield* sql<{ ids: Array<number> }>`SELECT ids FROM bench_segments_channels WHERE company_id = ${company}`
      const ids: Ids = { company, tags, channels: channels.ids }

      console.log(`  biggest company ${company}: ${RUNS} runs per mix, compiled and hand-written alternating; ms`)
      console.log(`  ${"mix".padEnd(30)} ${"count".padStart(8)}   compiled p50     p95   hand p50     p95   p95 ratio`)
      for (const mix of mixes(ids)) {
        const [mine] = yield* compiled(company, mix)
        const [theirs] = yield* mix.hand(sql, ids)
        if (mine.count !== theirs.count) {
          return yield* Effect.die(new Error(`${mix.name}: compiled ${mine.count} != hand-written ${theirs.count}`))
        }
        for (let i = 0; i < 3; i++) {
          yield* compiled(company, mix)
          yield* mix.hand(sql, ids)
        }
        const a: Array<number> = []
        const b: Array<number> = []
        for (let i = 0; i < RUNS; i++) {
          a.push((yield* timed(compiled(company, mix)))[0])
          b.push((yield* timed(mix.hand(sql, ids)))[0])
        }
        const sa = summary(a)
        const sb = summary(b)
        console.log(
          `  ${mix.name.padEnd(30)} ${String(mine.count).padStart(8)}   ${fmtMs(sa.p50)} ${fmtMs(sa.p95)}   ${fmtMs(sb.p50)} ${fmtMs(sb.p95)}   ` +
            `${(sa.p95 / sb.p95).toFixed(2).padStart(9)}`
        )
        recordResults("segments", { title: "Segment estimate counts: p95, compiled against hand-written SQL", x: "hand-written p95 ms", y: "compiled p95 ms", scatter: true }, { [mix.name]: [[sb.p95, sa.p95]] }, { mix: mix.name, members: mine.count, compiled: sa, hand: sb })
      }
    }).pipe(Effect.orDie))
  } finally {
    await drop()
  }
}

runBench(main)

/**
 * Message search at 1M messages: p50/p95/p99 per probe, measured through the statements
 * the endpoint runs (`SearchRepo.search`: transaction, statement timeout, unnamed page
 * statement, capped count), then a smaller sample through HTTP (auth, throttle, JSON).
 *
 * Data: BENCH_SEARCH_MESSAGES messages over BENCH_SEARCH_COMPANIES companies whose sizes
 * follow Zipf (s = 1.2: the biggest ≈ 26 %, two above 100k at 1M, the smallest ≈ 100), in
 * chronological order interleaved across companies as live traffic writes them. Text:
 * 2-72 words per message (mean ≈ 20) drawn Zipf-like from a Russian and English chat
 * vocabulary plus 27k generated words, 5 % with an order number. Generated on the server
 * (INSERT … SELECT generate_series) with the secondary indexes dropped and rebuilt.
 *
 * Probes, each for the biggest company and one of ≈ 1,000 messages: a frequent word, a
 * rare word, an absent word, two words. Every probe's answer is checked against a plain
 * count before timing. Then the same probes after 5,000 fresh messages sit in the GIN
 * pending list, the generic-plan trap (the same statement prepared with a generic plan),
 * and a real statement timeout answered over HTTP.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/search.ts      a fresh database on that server, dropped at the end
 *   BENCH_SEARCH_DB=name          use (and keep) that database; generated once, reused on later runs
 *   BENCH_SEARCH_MESSAGES=1000000 BENCH_SEARCH_COMPANIES=200 BENCH_SEARCH_QUERIES=200 BENCH_SEARCH_HTTP=50
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as os from "node:os"
import { type AppConfigShape } from "../src/platform/Config.ts"
import { runMigrations } from "../src/platform/Migrations.ts"
import { CompanyId } from "../src/auth/Domain.ts"
import { type SearchRequest, SearchRepo } from "../src/search/Repo.ts"
import { benchDatabase, runLikeApp, runOn } from "./support/Database.ts"
import { runBench } from "./support/Processes.ts"
import { fmtMs, summary } from "./support/Report.ts"
import { recordResults } from "./support/Results.ts"
import { startInProcess } from "./support/App.ts"

const MESSAGES = Number(process.env.BENCH_SEARCH_MESSAGES ?? 1_000_000)
const COMPANIES = Number(process.env.BENCH_SEARCH_COMPANIES ?? 200)
const QUERIES = Number(process.env.BENCH_SEARCH_QUERIES ?? 200)
const HTTP_QUERIES = Number(process.env.BENCH_SEARCH_HTTP ?? 50)
const COUNT_CAP = Number(process.env.SEARCH_COUNT_CAP ?? 1000)
const ZIPF = 1.2
const SMALL_TARGET = 1000

// The app's request log would drown the figures.
process.env.LOG_LEVEL ??= "warn"

if (!process.env.DATABASE_URL) {
  console.log("bench/search needs PostgreSQL: set DATABASE_URL (a database is created on that server). Skipped.")
  process.exit(0)
}
const serverUrl = process.env.DATABASE_URL


// ---------------------------------------------------------------- data

const common = [
  "the и to в you не a я and на is что it с i of for this that по me у we it's your как hi здравствуйте please пожалуйста",
  "order заказ thanks спасибо delivery доставка price цена when когда can можно today сегодня payment оплата",
  "tomorrow завтра product товар address адрес phone телефон size размер color цвет available наличии",
  "hello привет yes да no нет ok хорошо week неделю money деньги card карта return возврат store магазин",
  "courier курьер time время number номер status статус shipped отправлен waiting жду question вопрос",
  "discount скидка photo фото manager менеджер help помогите problem проблема refund moscow москва",
  "invoice счёт weight вес city город model модель warranty гарантия quality качество box коробка",
  "morning утром evening вечером call позвоните message сообщение email почта cancel отменить change изменить",
  "new новый old старый big большой small маленький black чёрный white белый red красный blue синий",
  "shoes обувь dress платье jacket куртка bag сумка smartphone смартфон laptop ноутбук book книга gift подарок"
].join(" ")

const vocabularySize = common.split(" ").length + 26999

const syllables = (list: string) => `(array[${list.split(" ").map((s) => `'${s}'`).join(",")}])`
const latin = [
  "ka lo mi ne ru sa ti vo ze pa do fi gu ha je ko lu ma no pe qui ra se to ul vi wa xo ye zu",
  "ra ben cor dal fen gir hol jum kir lan mor nix pol qua ros sil tor ulm ver wix yar zen bar cel dor fim gal hux ink jol",
  "a o us er an ix el on is um ta ex or in ly et id os ar ic ez ot ur ak em ip og ut yl az"
]
const cyrillic = [
  "ка ло ми не ру са ти во зе па до фи гу ха же ко лу ма но пе щу ра се то ул ви ва хо йе зу",
  "раб бен кор дал фен гир хол жум кир лан мор нис пол ква рос сил тор ульм вер вих яр зен бар сел дор фим гал хук инк жол",
  "ов ок ус ер ан их ель он ис ум та екс ор ин ли ет ид ос ар ик ез от ур ак ем ип ог ут ыл аз"
]
const word = (parts: ReadonlyArray<string>) =>
  `${syllables(parts[0])}[1 + n % 30] || ${syllables(parts[1])}[1 + (n / 30) % 30] || ${syllables(parts[2])}[1 + (n / 900) % 30]`

const generation = (messages: number) => [
  "SET jit = off",
  "SET synchronous_commit = off",
  "SET maintenance_work_mem = '512MB'",
  "SET work_mem = '256MB'",
  `CREATE TEMP TABLE bench_vocab AS
   SELECT row_number() OVER ()::int AS k, w FROM (
     SELECT unnest(string_to_array('${common.replace(/'/g, "''")}', ' ')) AS w
     UNION ALL
     SELECT CASE WHEN n % 2 = 0 THEN ${word(latin)} ELSE ${word(cyrillic)} END FROM generate_series(1, 26999) n
   ) x`,
  "ALTER TABLE bench_vocab ADD PRIMARY KEY (k)",
  "ANALYZE bench_vocab",
  `CREATE TABLE bench_companies AS
   WITH made AS (
     INSERT INTO companies (name, plan) SELECT 'bench-search-' || lpad(r::text, 3, '0'), 'business' FROM generate_series(1, ${COMPANIES}) r
     RETURNING id, name
   )
   SELECT id AS company_id, substr(name, 14)::int AS rank, 1 / power(substr(name, 14)::int, ${ZIPF}) AS weight FROM made`,
  // 100,000 slots in proportion to the weights: a uniform slot is a Zipf-distributed company.
  // A table, not an array: subscripting a large (TOASTed) array detoasts it on every row.
  `CREATE TEMP TABLE bench_slots AS
   SELECT row_number() OVER (ORDER BY c.rank)::int AS slot, c.company_id FROM bench_companies c,
     generate_series(1, greatest(1, round(100000 * c.weight / (SELECT sum(weight) FROM bench_companies))::int))`,
  "ALTER TABLE bench_slots ADD PRIMARY KEY (slot)",
  "ANALYZE bench_slots",
  `INSERT INTO channels (company_id, type, provider, name, webhook_secret)
   SELECT company_id, t, 'sandbox', 'bench ' || t, 'bench-secret' FROM bench_companies, unnest(array['msgr_a', 'msgr_b', 'msgr_c_business']) t`,
  `INSERT INTO contacts (company_id, first_name, last_name)
   SELECT c.company_id,
          (array['Anna','Ivan','Maria','Oleg','John','Kate','Пётр','Ольга','Сергей','Елена'])[1 + g % 10],
          (array['Smith','Petrov','Иванова','Brown','Кузнецов','Lee','Соколова','Miller'])[1 + (g / 10) % 8]
   FROM bench_companies c,
        generate_series(1, greatest(5, (${messages} * c.weight / (SELECT sum(weight) FROM bench_companies) / 25)::int)) g`,
  `INSERT INTO conversations (company_id, contact_id)
   SELECT company_id, id FROM contacts WHERE company_id IN (SELECT company_id FROM bench_companies)`,
  `CREATE TEMP TABLE bench_channels AS
   SELECT company_id, array_agg(id ORDER BY id) AS ids FROM channels
   WHERE company_id IN (SELECT company_id FROM bench_companies) GROUP BY 1`,
  `INSERT INTO threads (company_id, conversation_id, channel_id)
   SELECT v.company_id, v.id, ch.ids[1 + v.id % 3] FROM conversations v JOIN bench_channels ch ON ch.company_id = v.company_id`,
  `CREATE TEMP TABLE bench_threads AS
   SELECT t.company_id, row_number() OVER (PARTITION BY t.company_id ORDER BY t.id)::int AS k, t.conversation_id, t.id AS thread_id, t.channel_id
   FROM threads t WHERE t.company_id IN (SELECT company_id FROM bench_companies)`,
  "CREATE INDEX ON bench_threads (company_id, k)",
  "CREATE TEMP TABLE bench_counts AS SELECT company_id, count(*)::int AS n FROM bench_threads GROUP BY 1",
  "ANALYZE bench_threads",
  "ANALYZE bench_counts"
]

const messagesInsert = (count: number, start: string) => `
  INSERT INTO messages (company_id, conversation_id, thread_id, channel_id, direction, message_content, "timestamp", created_at, updated_at)
  SELECT t.company_id, t.conversation_id, t.thread_id, t.channel_id,
    CASE WHEN g.i % 3 = 0 THEN 'outbound' ELSE 'inbound' END,
    (SELECT string_agg(v.w, ' ') || CASE WHEN random() < 0.05 THEN ' #' || (random() * 1000000)::int ELSE '' END
     FROM (SELECT floor(exp(random() * ln(${vocabularySize})))::int AS k
           FROM generate_series(1, 2 + floor(power(random(), 3) * 70)::int + (g.i * 0)) j) r
     JOIN bench_vocab v ON v.k = r.k),
    g.at, g.at, g.at
  FROM (
    SELECT i, 1 + floor(random() * (SELECT count(*) FROM bench_slots))::int AS slot, random() AS r,
           timestamptz '${start}' + (i * interval '30 seconds') AS at
    FROM generate_series(1, ${count}) i
  ) g
  JOIN bench_slots sl ON sl.slot = g.slot
  JOIN bench_counts n ON n.company_id = sl.company_id
  JOIN bench_threads t ON t.company_id = sl.company_id AND t.k = 1 + floor(g.r * n.n)::int
  ORDER BY g.i`

const generate = (url: string) =>
  runOn(url, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const begin = performance.now()
    for (const statement of generation(MESSAGES)) yield* sql.unsafe(statement)
    // Loading with the secondary indexes in place costs several times more; they are
    // rebuilt afterwards from their own definitions, so the bench uses the migration's indexes.
    const indexes = yield* sql<{ indexname: string; indexdef: string }>`
      SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'messages' AND indexname <> 'messages_pkey'`
    for (const index of indexes) yield* sql.unsafe(`DROP INDEX ${index.indexname}`)
    // The rows reference their own thread and company by construction: skip the foreign-key
    // triggers where the role may (superuser), else pay for them.
    yield* sql.unsafe("SET session_replication_role = replica").pipe(Effect.ignore)
    const loadStart = performance.now()
    yield* sql.unsafe(messagesInsert(MESSAGES, "2024-01-01"))
    const loaded = performance.now()
    yield* sql.unsafe("SET session_replication_role = origin").pipe(Effect.ignore)
    for (const index of indexes) yield* sql.unsafe(index.indexdef)
    const indexed = performance.now()
    yield* sql.unsafe("VACUUM ANALYZE messages").unprepared
    for (const table of ["companies", "channels", "contacts", "conversations", "threads"]) yield* sql.unsafe(`ANALYZE ${table}`).unprepared
    yield* sql.unsafe("CREATE TABLE bench_search_meta AS SELECT now() AS generated_at")
    console.log(
      `  generated ${MESSAGES.toLocaleString("en")} messages: ${((loaded - loadStart) / 1000).toFixed(1)} s insert, ` +
        `${((indexed - loaded) / 1000).toFixed(1)} s indexes (${indexes.map((i) => i.indexname).join(", ")}), ` +
        `${((performance.now() - begin) / 1000).toFixed(1)} s in all`
    )
  }).pipe(Effect.orDie))

/** Fresh messages that stay in the GIN pending list (fastupdate) until the next vacuum. */
const addFresh = (url: string, count: number) =>
  runOn(url, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const statement of generation(0).filter((s) => !s.includes("bench_companies AS") && !/INSERT INTO (channels|contacts|conversations|threads)/.test(s))) {
      yield* sql.unsafe(statement)
    }
    yield* sql.unsafe(messagesInsert(count, "2026-01-01"))
    yield* sql.unsafe("CREATE EXTENSION IF NOT EXISTS pageinspect").pipe(Effect.ignore)
    const [pending] = yield* sql<{ pages: number }>`
      SELECT (gin_metapage_info(get_raw_page('messages_search_idx', 0))).n_pending_pages AS pages`.pipe(
      Effect.catchCause(() => Effect.succeed([{ pages: -1 }]))
    )
    return pending.pages
  }).pipe(Effect.orDie))

// ---------------------------------------------------------------- measuring

interface Probe {
  readonly name: string
  readonly q: string
}

const requestFor = (q: string): SearchRequest => ({
  q,
  conversationId: undefined,
  visible: "all",
  perPage: 20,
  offset: 0,
  countCap: COUNT_CAP,
  timeoutMs: 2000
})

const measure = (url: string, companies: ReadonlyArray<{ readonly label: string; readonly id: number }>, probes: ReadonlyArray<Probe>, stage: string) =>
  runLikeApp(url, Effect.gen(function*() {
    const repo = yield* SearchRepo
    const sql = yield* SqlClient.SqlClient
    const rows: Array<string> = []
    for (const company of companies) {
      for (const probe of probes) {
        // Checked before timing: the page is newest first and the total agrees with a plain count.
        const result = yield* repo.search(CompanyId.make(company.id), requestFor(probe.q))
        const [{ n }] = yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM messages
          WHERE company_id = ${company.id} AND deleted_at IS NULL
            AND search_keys @> message_search_keys(${company.id}::bigint, ${probe.q}::text)
            AND cardinality(message_search_keys(${company.id}::bigint, ${probe.q}::text)) > 0`
        const expected = n >= COUNT_CAP ? Math.max(COUNT_CAP, 21) : n
        if (result.total !== expected) throw new Error(`${company.label}/${probe.name}: total ${result.total}, expected ${expected}`)
        const times = result.rows.map((r) => r.created_at.getTime())
        if (times.some((t, i) => i > 0 && t > times[i - 1])) throw new Error(`${company.label}/${probe.name}: not newest first`)
        if (result.rows.length !== Math.min(20, n)) throw new Error(`${company.label}/${probe.name}: ${result.rows.length} rows`)
        const samples: Array<number> = []
        for (let i = 0; i < QUERIES; i++) {
          const t0 = performance.now()
          yield* repo.search(CompanyId.make(company.id), requestFor(probe.q))
          samples.push(performance.now() - t0)
        }
        const s = summary(samples)
        recordResults("search", { title: "Message search at 1M messages: p95 against matches", x: "matches", y: "p95 ms", scatter: true }, { [`${company.label}, ${stage}`]: [[n, s.p95, probe.name]] }, { company: company.label, stage, probe: probe.name, matches: n, ...s })
        rows.push(
          `  ${company.label.padEnd(22)} ${probe.name.padEnd(9)} ${String(n).padStart(7)} ${fmtMs(s.p50)} ${fmtMs(s.p95)} ${fmtMs(s.p99)} ${fmtMs(s.max)}`
        )
      }
    }
    return rows
  }).pipe(Effect.provide(SearchRepo.layer), Effect.orDie))

/** The same page statement once as the endpoint runs it, once prepared with a forced generic plan. */
const genericTrap = (url: string, companies: ReadonlyArray<{ readonly label: string; readonly id: number }>, probes: ReadonlyArray<Probe>) =>
  runLikeApp(url, Effect.gen(function*() {
    const repo = yield* SearchRepo
    const sql = yield* SqlClient.SqlClient
    const rows: Array<string> = []
    const plans: Array<string> = []
    for (const company of companies) {
      for (const probe of probes) {
        const [text, params] = repo.statement(CompanyId.make(company.id), requestFor(probe.q))
        const time = (effect: Effect.Effect<unknown, unknown>) =>
          Effect.gen(function*() {
            const samples: Array<number> = []
            for (let i = 0; i < 30; i++) {
              const t0 = performance.now()
              yield* effect
              samples.push(performance.now() - t0)
            }
            return summary(samples).p50
          })
        const custom = yield* repo.bounded(10_000, time(sql.unsafe(text, params as Array<unknown>).unprepared))
        const generic = yield* Effect.gen(function*() {
          yield* sql`SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`
          const ms = yield* time(sql.unsafe(text, params as Array<unknown>))
          // The generic plan as PostgreSQL keeps it for this prepared statement.
          yield* sql.unsafe(`PREPARE bench_generic AS ${text}`)
          const literal = (v: unknown) => (typeof v === "number" ? String(v) : `'${String(v).replace(/'/g, "''")}'`)
          const explained = yield* sql.unsafe<{ "QUERY PLAN": string }>(
            `EXPLAIN EXECUTE bench_generic(${params.map(literal).join(", ")})`
          ).unprepared
          yield* sql.unsafe("DEALLOCATE bench_generic")
          return { ms, plan: explained.map((r) => r["QUERY PLAN"]) }
        }).pipe(sql.withTransaction)
        const customPlan = yield* repo.bounded(10_000, sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params as Array<unknown>).unprepared)
        rows.push(`  ${company.label.padEnd(22)} ${probe.name.padEnd(9)} ${fmtMs(custom)} ${fmtMs(generic.ms)} ${(generic.ms / custom).toFixed(1).padStart(6)}×`)
        if (company === companies[0]) {
          const pick = (lines: ReadonlyArray<string>) =>
            lines.filter((l) => /on messages m|on messages_|Sort Key: m\./.test(l))
              .map((l) => l.replace(/\s+\(cost=.*$/, "").replace(/^[\s->]+/, "").trim()).join(" / ")
          plans.push(`  ${probe.name.padEnd(9)} custom:  ${pick(customPlan.map((r) => r["QUERY PLAN"]))}`)
          plans.push(`  ${"".padEnd(9)} generic: ${pick(generic.plan)}`)
        }
      }
    }
    return { rows, plans }
  }).pipe(Effect.provide(SearchRepo.layer), Effect.orDie))

/** The app itself against the bench database, with the throttles out of the way (or a 1 ms search budget). */
const startApp = (url: string, overrides: Partial<AppConfigShape> = {}) =>
  startInProcess(url, "bench/search", { heavyRateLimitPerMinute: 1_000_000_000, searchCountCap: COUNT_CAP, ...overrides })

const httpSample = async (url: string, companies: ReadonlyArray<{ readonly label: string; readonly id: number }>, probes: ReadonlyArray<Probe>) => {
  const app = await startApp(url)
  const rows: Array<string> = []
  try {
    const sample = async (label: string, get: () => Promise<Response>) => {
      const first = await get()
      const body = await first.json() as any
      if (first.status !== 200 || body.data === undefined) throw new Error(`HTTP ${first.status}: ${JSON.stringify(body)}`)
      const samples: Array<number> = []
      for (let i = 0; i < HTTP_QUERIES; i++) {
        const t0 = performance.now()
        const res = await get()
        await res.arrayBuffer()
        if (res.status !== 200) throw new Error(`HTTP ${res.status}`)
        samples.push(performance.now() - t0)
      }
      const s = summary(samples)
      rows.push(`  ${label} ${fmtMs(s.p50)} ${fmtMs(s.p95)} ${fmtMs(s.p99)}`)
    }
    const baseline = await app.token(companies[0].id)
    await sample(`${"GET /v1/me (baseline: auth, rate limit)".padEnd(32)}`, () =>
      fetch(`${app.base}/v1/me`, { headers: { authorization: `Bearer ${baseline}` } }))
    for (const company of companies) {
      const token = await app.token(company.id)
      for (const probe of probes) {
        await sample(`${company.label.padEnd(22)} ${probe.name.padEnd(9)}`, () =>
          fetch(`${app.base}/v1/messages/search?q=${encodeURIComponent(probe.q)}`, { headers: { authorization: `Bearer ${token}` } }))
      }
    }
  } finally {
    await app.close()
  }
  return rows
}

const timeoutDemo = async (url: string, companyId: number, q: string) => {
  const app = await startApp(url, { searchTimeoutMs: 1 })
  try {
    const token = await app.token(companyId)
    const t0 = performance.now()
    const res = await fetch(`${app.base}/v1/messages/search?q=${encodeURIComponent(q)}&page=500&perPage=100`, {
      headers: { authorization: `Bearer ${token}` }
    })
    return `  SEARCH_TIMEOUT_MS=1, page 500 of "${q}" in the biggest company: HTTP ${res.status} ${await res.text()} in ${(performance.now() - t0).toFixed(1)} ms`
  } finally {
    await app.close()
  }
}

// ---------------------------------------------------------------- main

const main = async () => {
  const { name, url, drop } = await benchDatabase(serverUrl, "crm_bench_search", process.env.BENCH_SEARCH_DB)
  const version = await runOn(url, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [v] = yield* sql<{ version: string; shared_buffers: string; work_mem: string }>`
      SELECT current_setting('server_version') AS version, current_setting('shared_buffers') AS shared_buffers,
             current_setting('work_mem') AS work_mem`
    return v
  }).pipe(Effect.orDie))
  console.log(`bench/search — ${os.cpus().length} × ${os.cpus()[0]?.model.trim()}, ${Math.round(os.totalmem() / 2 ** 30)} GB, Node ${process.version}`)
  console.log(`  PostgreSQL ${version.version} (shared_buffers ${version.shared_buffers}, work_mem ${version.work_mem}), database ${name}`)
  console.log(`  ${MESSAGES.toLocaleString("en")} messages over ${COMPANIES} companies (Zipf s=${ZIPF}); ${QUERIES} queries per probe; count cap ${COUNT_CAP}`)
  try {
    await runOn(url, runMigrations)
    const generated = await runOn(url, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'bench_search_meta'`
      return rows[0].n > 0
    }).pipe(Effect.orDie))
    if (!generated) await generate(url)
    else console.log("  reusing the generated data")

    const sizes = await runOn(url, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ company_id: number; rank: number; n: number }>`
        SELECT c.company_id::int AS company_id, c.rank, count(m.id)::int AS n FROM bench_companies c LEFT JOIN messages m ON m.company_id = c.company_id
        GROUP BY 1, 2 ORDER BY 2`
    }).pipe(Effect.orDie))
    const big = sizes[0]
    const small = sizes.reduce((best, c) => (Math.abs(c.n - SMALL_TARGET) < Math.abs(best.n - SMALL_TARGET) ? c : best))
    const total = sizes.reduce((sum, c) => sum + c.n, 0)
    console.log(
      `  sizes: biggest ${sizes.slice(0, 3).map((c) => c.n.toLocaleString("en")).join(", ")}; median ${sizes[sizes.length >> 1].n}; ` +
        `smallest ${sizes[sizes.length - 1].n}; ${sizes.filter((c) => c.n >= 100_000).length} above 100k; ${total.toLocaleString("en")} in all`
    )
    const rare = await runOn(url, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // A generated word with a handful of hits in the biggest company.
      const [row] = yield* sql<{ w: string }>`
        SELECT v.w FROM (SELECT w FROM (VALUES ('коросид'), ('doberak'), ('сабенов'), ('tibena')) x(w)) v
        ORDER BY abs((SELECT count(*) FROM messages WHERE company_id = ${big.company_id} AND deleted_at IS NULL
                      AND search_keys @> message_search_keys(${big.company_id}::bigint, v.w)) - 30) LIMIT 1`
      return row.w
    }).pipe(Effect.orDie))
    const probes: Array<Probe> = [
      { name: "frequent", q: "заказ" },
      { name: "rare", q: rare },
      { name: "absent", q: "qzxvwj" },
      { name: "two", q: "заказ доставка" }
    ]
    const companies = [
      { label: `biggest (${big.n.toLocaleString("en")})`, id: big.company_id },
      { label: `small (${small.n.toLocaleString("en")})`, id: small.company_id }
    ]
    const header = `  ${"company".padEnd(22)} ${"probe".padEnd(9)} ${"matches".padStart(7)} ${"p50".padStart(7)} ${"p95".padStart(7)} ${"p99".padStart(7)} ${"max".padStart(7)}  (ms)`

    console.log("\nSearchRepo.search (the endpoint's statements, one transaction each), vacuumed table:")
    console.log(header)
    for (const row of await measure(url, companies, probes, "vacuumed")) console.log(row)

    const pending = await addFresh(url, 5000)
    console.log(`\nthe same after 5,000 fresh messages, not vacuumed (GIN pending pages: ${pending < 0 ? "n/a" : pending}):`)
    console.log(header)
    for (const row of await measure(url, companies, probes, "5,000 fresh")) console.log(row)
    await runOn(url, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // Back to the generated data for the next runs. Without the foreign-key triggers: the
      // self-reference messages.quoted_message_id has no index, so each deleted row would scan the table.
      yield* Effect.gen(function*() {
        yield* sql.unsafe("SET session_replication_role = replica")
        yield* sql.unsafe("DELETE FROM messages WHERE created_at >= '2026-01-01' AND company_id IN (SELECT company_id FROM bench_companies)")
        yield* sql.unsafe("SET session_replication_role = origin")
      }).pipe(Effect.catchCause(() => Effect.sync(() => console.log("  (the fresh messages stay: not a superuser)"))))
      yield* sql.unsafe("VACUUM ANALYZE messages").unprepared
    }).pipe(Effect.orDie))

    console.log("\nthe generic-plan trap: page statement, p50 of 30 (ms), unnamed (custom plan) vs prepared with a forced generic plan:")
    const trap = await genericTrap(url, companies, probes)
    for (const row of trap.rows) console.log(row)
    console.log("  plans in the biggest company:")
    for (const row of trap.plans) console.log(row)

    console.log(`\nHTTP (GET /v1/messages/search, service token, ${HTTP_QUERIES} sequential requests per probe, in-process server):`)
    console.log(`  ${"company".padEnd(22)} ${"probe".padEnd(9)} ${"p50".padStart(7)} ${"p95".padStart(7)} ${"p99".padStart(7)}  (ms)`)
    for (const row of await httpSample(url, companies, probes)) console.log(row)

    console.log("\nstatement timeout:")
    console.log(await timeoutDemo(url, big.company_id, "заказ"))
  } finally {
    await drop()
  }
}

await runBench(main)
process.exit(0)

/**
 * The deal board at 1M deals: p50/p95/p99 through HTTP (authentication, rate limiter, JSON) of
 *
 *   - `GET /v1/deals?funnel_id=…` first page and page 50 (perPage 20, so OFFSET 980), with the total;
 *   - a stage move, `POST /v1/deals/{id}` `{funnel_stage_id}` between two open stages (the update,
 *     two timeline entries' worth of reads, a `stage_changed` entry, `deal.updated` and
 *     `deal.stage_changed` events, one transaction).
 *
 * Goals: list p95 ≤ 20 ms, move p95 ≤ 10 ms.
 *
 * Data: BENCH_DEALS (1,000,000) deals over BENCH_DEALS_COMPANIES (100) companies, interleaved by id as
 * live traffic writes them; each company has two funnels (80 % / 20 % of its deals) of five stages
 * (three open, won, lost). Generated on the server (INSERT … SELECT generate_series) with the secondary
 * indexes dropped and rebuilt exactly as the migration made them. The measured company is an ordinary
 * one of the hundred (10k deals, 8k in the measured funnel). Before timing, the pages are checked
 * against a plain query and the move against its answer.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/deals.ts      a fresh database on that server, dropped at the end
 *   BENCH_DEALS_DB=name      use (and keep) that database; generated once, reused later
 *   BENCH_DEALS=1000000 BENCH_DEALS_COMPANIES=100 BENCH_DEALS_SAMPLES=300
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { runMigrations } from "../src/platform/Migrations.ts"
import { benchDatabase, runOn } from "./support/Database.ts"
import { runBench } from "./support/Processes.ts"
import { fmtMs, machine, summary } from "./support/Report.ts"
import { recordResults } from "./support/Results.ts"
import { startInProcess } from "./support/App.ts"

const DEALS = Number(process.env.BENCH_DEALS ?? 1_000_000)
const COMPANIES = Number(process.env.BENCH_DEALS_COMPANIES ?? 100)
const SAMPLES = Number(process.env.BENCH_DEALS_SAMPLES ?? 300)

process.env.LOG_LEVEL ??= "warn"

if (!process.env.DATABASE_URL) {
  console.log("bench/deals needs PostgreSQL: set DATABASE_URL (a database is created on that server). Skipped.")
  process.exit(0)
}
const serverUrl = process.env.DATABASE_URL

const query = <Row extends object>(url: string, text: string, params: ReadonlyArray<unknown> = []) =>
  runOn(url, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.unsafe<Row>(text, params as Array<unknown>)
  }).pipe(Effect.orDie))

const generate = async (url: string) => {
  const started = performance.now()
  const indexes = await query<{ indexdef: string; indexname: string }>(
    url,
    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'deals' AND indexname <> 'deals_pkey'"
  )
  await runOn(url, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const statement of [
      "SET synchronous_commit = off",
      "SET maintenance_work_mem = '512MB'",
      ...indexes.map((i) => `DROP INDEX ${i.indexname}`),
      `CREATE TABLE bench_deals_companies AS
       WITH made AS (INSERT INTO companies (name, plan) SELECT 'bench-deals-' || r, 'business' FROM generate_series(1, ${COMPANIES}) r RETURNING id)
       SELECT id AS company_id, (row_number() OVER (ORDER BY id))::int AS rank FROM made`,
      `INSERT INTO funnels (company_id, name, is_default, "order")
       SELECT company_id, f.name, f.ord = 0, f.ord FROM bench_deals_companies, (VALUES ('Sales', 0), ('Partners', 1)) f(name, ord)`,
      `INSERT INTO funnel_stages (company_id, funnel_id, name, type, "order")
       SELECT f.company_id, f.id, s.name, s.type, s.ord FROM funnels f JOIN bench_deals_companies c USING (company_id),
         (VALUES ('New', 'open', 0), ('Qualified', 'open', 1), ('Proposal', 'open', 2), ('Won', 'success', 3), ('Lost', 'failed', 4)) s(name, type, ord)`,
      `INSERT INTO contacts (company_id, first_name) SELECT company_id, 'Contact ' || g FROM bench_deals_companies, generate_series(1, 50) g`,
      `CREATE TEMP TABLE bench_stage_map AS
       SELECT c.rank, f.id AS funnel_id, s.id AS stage_id, s.type, f."order" AS fi, s."order" AS si
       FROM bench_deals_companies c JOIN funnels f ON f.company_id = c.company_id JOIN funnel_stages s ON s.funnel_id = f.id`,
      "CREATE INDEX ON bench_stage_map (rank, fi, si)",
      `CREATE TEMP TABLE bench_contact_map AS
       SELECT c.rank, min(ct.id) AS contact_id FROM bench_deals_companies c JOIN contacts ct ON ct.company_id = c.company_id GROUP BY 1`,
      "CREATE INDEX ON bench_contact_map (rank)",
      "ANALYZE bench_stage_map",
      "ANALYZE bench_contact_map",
      `INSERT INTO deals (company_id, contact_id, funnel_id, funnel_stage_id, title, amount, currency, status, responsible_user_id)
       SELECT c.company_id, cm.contact_id, sm.funnel_id, sm.stage_id, 'Deal ' || g, ((g::bigint * 7919) % 10000000) / 100.0, 'KZT',
         CASE sm.type WHEN 'success' THEN 'won' WHEN 'failed' THEN 'lost' ELSE 'open' END, NULL
       FROM generate_series(1, ${DEALS}) g
       JOIN bench_deals_companies c ON c.rank = 1 + g % ${COMPANIES}
       JOIN bench_stage_map sm ON sm.rank = c.rank AND sm.fi = CASE WHEN (g / ${COMPANIES}) % 5 = 0 THEN 1 ELSE 0 END
         AND sm.si = (g / ${COMPANIES} / 5) % 5
       JOIN bench_contact_map cm ON cm.rank = c.rank`,
      ...indexes.map((i) => i.indexdef),
      // What autovacuum does to a live table: statistics, and a visibility map for index-only scans.
      "VACUUM ANALYZE deals",
      "CREATE TABLE bench_deals_meta (generated_at timestamptz DEFAULT now())",
      "INSERT INTO bench_deals_meta DEFAULT VALUES"
    ]) yield* sql.unsafe(statement)
  }).pipe(Effect.orDie))
  console.log(`  generated in ${((performance.now() - started) / 1000).toFixed(1)} s (indexes rebuilt: ${indexes.map((i) => i.indexname).join(", ")})`)
}

const startApp = (url: string) => startInProcess(url, "bench/deals")

const timed = async (label: string, call: (i: number) => Promise<Response>) => {
  const samples: Array<number> = []
  for (let i = 0; i < SAMPLES; i++) {
    const t0 = performance.now()
    const res = await call(i)
    await res.arrayBuffer()
    samples.push(performance.now() - t0)
    if (res.status !== 200) throw new Error(`${label}: HTTP ${res.status}`)
  }
  const s = summary(samples)
  console.log(`  ${label.padEnd(34)} ${fmtMs(s.p50)} ${fmtMs(s.p95)} ${fmtMs(s.p99)} ${fmtMs(s.max)}`)
  return s
}

const main = async () => {
  const { name, url, drop } = await benchDatabase(serverUrl, "crm_bench_deals", process.env.BENCH_DEALS_DB)
  const [version] = await query<{ version: string }>(url, "SELECT current_setting('server_version') AS version")
  console.log(`bench/deals — ${machine()}, Node ${process.version}, PostgreSQL ${version.version}, database ${name}`)
  console.log(`  ${DEALS.toLocaleString("en")} deals over ${COMPANIES} companies; ${SAMPLES} sequential requests per probe`)
  try {
    await runOn(url, runMigrations)
    const [meta] = await query<{ n: number }>(url, "SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'bench_deals_meta'")
    if (meta.n === 0) await generate(url)
    else console.log("  reusing the generated data")
    // Statistics a later migration may have declared are filled by ANALYZE (autovacuum's job on a live table).
    await query(url, "ANALYZE deals")

    const [target] = await query<{ company_id: number; funnel_id: number; deals: number; total: number }>(url, `
      SELECT c.company_id::int AS company_id, f.id::int AS funnel_id,
        (SELECT count(*)::int FROM deals d WHERE d.company_id = c.company_id AND d.funnel_id = f.id AND d.deleted_at IS NULL) AS deals,
        (SELECT count(*)::int FROM deals) AS total
      FROM bench_deals_companies c JOIN funnels f ON f.company_id = c.company_id AND f.is_default
      WHERE c.rank = ${Math.ceil(COMPANIES / 2)}`)
    const stages = await query<{ id: number }>(url, `SELECT id::int AS id FROM funnel_stages WHERE funnel_id = $1 AND type = 'open' ORDER BY "order" LIMIT 2`, [target.funnel_id])
    console.log(`  ${target.total.toLocaleString("en")} deals in all; measured funnel ${target.funnel_id} holds ${target.deals.toLocaleString("en")}`)

    const app = await startApp(url)
    try {
      const token = await app.token(target.company_id)
      const headers = { authorization: `Bearer ${token}`, accept: "application/json", "content-type": "application/json" }
      const list = (page: number) => fetch(`${app.base}/v1/deals?funnel_id=${target.funnel_id}&page=${page}&perPage=20`, { headers })

      // Checked before timing: the pages are the right rows and the total is exact.
      for (const page of [1, 50]) {
        const body = await (await list(page)).json() as any
        const expected = await query<{ id: number }>(url, `
          SELECT id::int AS id FROM deals WHERE company_id = $1 AND funnel_id = $2 AND deleted_at IS NULL
          ORDER BY id DESC LIMIT 20 OFFSET ${(page - 1) * 20}`, [target.company_id, target.funnel_id])
        const got = body.data.items.map((d: any) => d.id)
        if (JSON.stringify(got) !== JSON.stringify(expected.map((r) => r.id)) || body.data.pagination.total !== target.deals) {
          throw new Error(`page ${page} check failed: ${JSON.stringify(body.data.pagination)}`)
        }
      }
      const movable = await query<{ id: number; funnel_stage_id: number }>(url, `
        SELECT id::int AS id, funnel_stage_id::int AS funnel_stage_id FROM deals
        WHERE company_id = $1 AND funnel_id = $2 AND ${"funnel_stage_id"} IN (${stages[0].id}, ${stages[1].id})
        ORDER BY id DESC LIMIT ${SAMPLES + 1}`, [target.company_id, target.funnel_id])
      const move = (deal: { id: number; funnel_stage_id: number }) => {
        const to = deal.funnel_stage_id === stages[0].id ? stages[1].id : stages[0].id
        deal.funnel_stage_id = to
        return fetch(`${app.base}/v1/deals/${deal.id}`, { method: "POST", headers, body: JSON.stringify({ funnel_stage_id: to }) })
      }
      const probe = movable[SAMPLES]
      const checked = await (await move(probe)).json() as any
      if (checked.data?.funnel_stage_id !== probe.funnel_stage_id || checked.data?.status !== undefined) {
        throw new Error(`move check failed: ${JSON.stringify(checked)}`)
      }

      for (let i = 0; i < 30; i++) await (await list(1 + (i % 50))).arrayBuffer()
      console.log(`  ${"probe".padEnd(34)} ${"p50".padStart(7)} ${"p95".padStart(7)} ${"p99".padStart(7)} ${"max".padStart(7)}  (ms)`)
      const baseline = await timed("GET /v1/me (baseline: auth only)", () => fetch(`${app.base}/v1/me`, { headers }))
      const first = await timed("GET /v1/deals?funnel_id page 1", () => list(1))
      const fifty = await timed("GET /v1/deals?funnel_id page 50", () => list(50))
      const moves = await timed("POST /v1/deals/{id} stage move", (i) => move(movable[i % SAMPLES]))
      // The same statements straight on the database (one connection, no HTTP): what the index gives.
      const sqlSamples = await runOn(url, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const out: Record<string, Array<number>> = { page1: [], page50: [], count: [] }
        for (let i = 0; i < SAMPLES; i++) {
          for (const [key, statement] of [
            ["page1", sql`SELECT * FROM deals WHERE company_id = ${target.company_id} AND id IN (SELECT id FROM deals WHERE company_id = ${target.company_id} AND deleted_at IS NULL AND funnel_id = ${target.funnel_id} ORDER BY id DESC LIMIT 20 OFFSET 0) ORDER BY id DESC`],
            ["page50", sql`SELECT * FROM deals WHERE company_id = ${target.company_id} AND id IN (SELECT id FROM deals WHERE company_id = ${target.company_id} AND deleted_at IS NULL AND funnel_id = ${target.funnel_id} ORDER BY id DESC LIMIT 20 OFFSET 980) ORDER BY id DESC`],
            ["count", sql`SELECT count(*)::int FROM deals WHERE company_id = ${target.company_id} AND deleted_at IS NULL AND funnel_id = ${target.funnel_id}`]
          ] as const) {
            const t0 = performance.now()
            yield* statement
            out[key].push(performance.now() - t0)
          }
        }
        const plan = yield* sql.unsafe<{ "QUERY PLAN": string }>(
          `EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM deals WHERE company_id = ${target.company_id} AND id IN (SELECT id FROM deals WHERE company_id = ${target.company_id} AND deleted_at IS NULL AND funnel_id = ${target.funnel_id} ORDER BY id DESC LIMIT 20 OFFSET 980) ORDER BY id DESC`
        )
        return { out, plan: plan.map((r) => r["QUERY PLAN"]) }
      }).pipe(Effect.orDie))
      for (const [key, samples] of Object.entries(sqlSamples.out)) {
        const s = summary(samples)
        console.log(`  ${("SQL only: " + key).padEnd(34)} ${fmtMs(s.p50)} ${fmtMs(s.p95)} ${fmtMs(s.p99)} ${fmtMs(s.max)}`)
      }
      console.log("  plan of page 50:\n    " + sqlSamples.plan.join("\n    "))
      console.log(`  HTTP over baseline (p95): page 1 +${(first.p95 - baseline.p95).toFixed(2)} ms, page 50 +${(fifty.p95 - baseline.p95).toFixed(2)} ms`)
      const verdict = (ok: boolean) => (ok ? "met" : "MISSED")
      recordResults("deals", { title: "Deals board: latency per probe", x: "percentile", y: "ms", logY: true }, Object.fromEntries(Object.entries({ "GET /v1/me": baseline, "list page 1": first, "list page 50": fifty, "stage move": moves }).map(([k, s]) => [k, [[50, s.p50], [95, s.p95], [99, s.p99]]])), { deals: DEALS, baseline, first, fifty, moves, sql: Object.fromEntries(Object.entries(sqlSamples.out).map(([k, v]) => [k, summary(v)])) })
      console.log(`  goals: list p95 ≤ 20 ms ${verdict(Math.max(first.p95, fifty.p95) <= 20)}; move p95 ≤ 10 ms ${verdict(moves.p95 <= 10)}`)
    } finally {
      await app.close()
    }
  } finally {
    await drop()
  }
}

void runBench(main)

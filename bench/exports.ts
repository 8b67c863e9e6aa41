/**
 * Exports at 1M messages: rows/s and peak RSS of the exporter's own path (`writeRows`: keyset pages
 * from `ExportsRepo.messages` written by `fileWriter`, exactly what the `export.run` job does minus
 * its progress events) to CSV and to XLSX, next to PostgreSQL's
 * `COPY (the same SELECT) TO STDOUT WITH CSV` through psql into /dev/null.
 * Goals: CSV ≥ 0.5 × COPY's rows/s; RSS growth ≤ 100 MB.
 *
 * Data (INSERT … SELECT on the server): one company, 2 channels, 1,000 contacts with a
 * conversation and thread each, BENCH_EXPORTS_MESSAGES messages (default 1,000,000) of ~60 chars.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/exports.ts   a fresh database on that server, dropped at the end
 *   BENCH_EXPORTS_DB=name     use (and keep) that database; generated once, reused on later runs
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { CompanyId } from "../src/auth/Domain.ts"
import { writeRows } from "../src/exports/Job.ts"
import { ExportsRepo, messageColumns } from "../src/exports/Repo.ts"
import { fileWriter } from "../src/exports/Writers.ts"
import { runMigrations } from "../src/platform/Migrations.ts"
import { benchDatabase, runLikeApp } from "./support/Database.ts"
import { recordResults } from "./support/Results.ts"

const MESSAGES = Number(process.env.BENCH_EXPORTS_MESSAGES ?? 1_000_000)
process.env.LOG_LEVEL ??= "warn"

if (!process.env.DATABASE_URL) {
  console.log("bench/exports needs PostgreSQL: set DATABASE_URL (a database is created on that server). Skipped.")
  process.exit(0)
}

const generate = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const existing = yield* sql<{ id: number }>`SELECT id FROM companies WHERE name = 'bench-exports'`
  if (existing.length > 0) return Number(existing[0].id)
  const [{ id }] = yield* sql<{ id: number }>`INSERT INTO companies (name, plan) VALUES ('bench-exports', 'business') RETURNING id`
  yield* sql`INSERT INTO channels (company_id, type, provider, name, webhook_secret)
    VALUES (${id}, 'msgr_a', 'sandbox', 'Main A', 's'), (${id}, 'msgr_b', 'sandbox', 'Side B', 's')`
  yield* sql`INSERT INTO contacts (company_id, first_name, last_name, display_name)
    SELECT ${id}, 'First' || g, 'Last' || g, 'Contact ' || g FROM generate_series(1, 1000) g`
  yield* sql`INSERT INTO conversations (company_id, contact_id) SELECT ${id}, c.id FROM contacts c WHERE c.company_id = ${id}`
  yield* sql`INSERT INTO threads (company_id, conversation_id, channel_id)
    SELECT ${id}, v.id, (SELECT min(id) + (v.id % 2) FROM channels WHERE company_id = ${id}) FROM conversations v WHERE v.company_id = ${id}`
  yield* sql.unsafe(`
    INSERT INTO messages (company_id, conversation_id, thread_id, channel_id, direction, message_content, "timestamp")
    SELECT ${id}, t.conversation_id, t.id, t.channel_id, CASE WHEN g % 3 = 0 THEN 'outbound' ELSE 'inbound' END,
      'Message number ' || g || ', with "quotes" and some text to fill a line',
      timestamptz '2026-01-01' + g * interval '1 second'
    FROM generate_series(1, ${MESSAGES}) g
    JOIN threads t ON t.company_id = ${id} AND t.conversation_id = (SELECT min(id) FROM conversations WHERE company_id = ${id}) + g % 1000`)
  yield* sql`ANALYZE`
  return Number(id)
})

const copySql = (companyId: number) => `
  COPY (SELECT m.id, m."timestamp", m.direction, m.message_type, m.message_content, m.status, m.conversation_id,
      coalesce(nullif(ct.display_name, ''), nullif(concat_ws(' ', ct.first_name, ct.last_name), '')) AS conversation_name,
      ct.id AS contact_id, coalesce(nullif(ct.display_name, ''), nullif(concat_ws(' ', ct.first_name, ct.last_name), '')) AS contact_name,
      m.channel_id, ch.name, ch.type, CASE WHEN t.is_group THEN t.id END, m.sender_user_id, m.created_at
    FROM messages m JOIN conversations cv ON cv.id = m.conversation_id JOIN contacts ct ON ct.id = cv.contact_id
    JOIN channels ch ON ch.id = m.channel_id JOIN threads t ON t.id = m.thread_id
    WHERE m.company_id = ${companyId} AND m.deleted_at IS NULL ORDER BY m.id) TO STDOUT WITH CSV HEADER`

const exportTo = (url: string, companyId: number, format: "csv" | "xlsx", file: string) =>
  runLikeApp(url, Effect.gen(function*() {
    const repo = yield* ExportsRepo
    const writer = yield* fileWriter(format, file, messageColumns, "messages")
    const base = process.memoryUsage().rss
    let peak = base
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50)
    const started = performance.now()
    const rows = yield* writeRows(repo, CompanyId.make(companyId), "messages", {}, writer, () => Effect.void)
    const seconds = (performance.now() - started) / 1000
    clearInterval(sampler)
    peak = Math.max(peak, process.memoryUsage().rss)
    return { rows, seconds, rowsPerSecond: rows / seconds, rssGrowthMb: (peak - base) / 2 ** 20, bytes: statSync(file).size }
  }).pipe(Effect.provide(ExportsRepo.layer)))

const main = async () => {
  const db = await benchDatabase(process.env.DATABASE_URL!, "bench_exports", process.env.BENCH_EXPORTS_DB)
  const dir = mkdtempSync(join(tmpdir(), "bench-exports-"))
  try {
    await runLikeApp(db.url, runMigrations)
    const t0 = performance.now()
    const companyId = await runLikeApp(db.url, generate)
    console.log(`data: ${MESSAGES} messages ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`)

    const c0 = performance.now()
    const copy = spawnSync("psql", [db.url, "-q", "-c", copySql(companyId)], { stdio: ["ignore", "ignore", "inherit"] })
    if (copy.status !== 0) throw new Error("psql COPY failed")
    const copySeconds = (performance.now() - c0) / 1000
    const copyRate = MESSAGES / copySeconds

    const csv = await exportTo(db.url, companyId, "csv", join(dir, "m.csv"))
    const xlsx = await exportTo(db.url, companyId, "xlsx", join(dir, "m.xlsx"))
    const line = (name: string, r: typeof csv) =>
      `${name.padEnd(5)} ${r.rows} rows in ${r.seconds.toFixed(1)} s = ${Math.round(r.rowsPerSecond)} rows/s, ` +
      `${(r.bytes / 2 ** 20).toFixed(0)} MB file, RSS growth ${r.rssGrowthMb.toFixed(0)} MB`
    console.log(`COPY  ${MESSAGES} rows in ${copySeconds.toFixed(1)} s = ${Math.round(copyRate)} rows/s (psql to /dev/null)`)
    console.log(line("CSV", csv))
    console.log(line("XLSX", xlsx))
    recordResults("exports", { title: `Exports of ${MESSAGES} messages: rows/s and RSS growth`, x: "rows/s", y: "RSS growth MB", scatter: true }, { CSV: [[csv.rowsPerSecond, csv.rssGrowthMb, "CSV"]], XLSX: [[xlsx.rowsPerSecond, xlsx.rssGrowthMb, "XLSX"]], COPY: [[copyRate, 0, "COPY"]] }, { messages: MESSAGES, copyRowsPerSecond: copyRate, csv, xlsx })
    console.log(`CSV / COPY = ${(csv.rowsPerSecond / copyRate).toFixed(2)} (goal ≥ 0.5); RSS growth CSV ${csv.rssGrowthMb.toFixed(0)} MB, XLSX ${xlsx.rssGrowthMb.toFixed(0)} MB (goal ≤ 100)`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
    await db.drop()
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})

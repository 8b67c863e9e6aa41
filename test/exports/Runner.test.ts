import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { existsSync } from "node:fs"
import { mkdir, writeFile } from "node:fs/promises"
import { dirname } from "node:path"
import { afterAll, beforeAll } from "vitest"
import { ExportJob, gaveUpMessage } from "../../src/exports/Job.ts"
import { BlobStore } from "../../src/platform/files/BlobStore.ts"
import { freshDatabase } from "../support/Databases.ts"
import { payloadsOf, query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { seed, settled, wake } from "./support.ts"

/**
 * The runner's side of exports, on a database of this file's own: no runner of another test
 * file's app shares its jobs table, so "this runner" is the only one.
 */
let server: RunningServer
let database: { readonly url: string; readonly drop: () => Promise<void> } | undefined
beforeAll(async () => {
  database = process.env.DATABASE_URL ? await freshDatabase(process.env.DATABASE_URL) : undefined
  server = await startServer(database === undefined ? {} : { databaseUrl: Option.some(Redacted.make(database.url)) })
})
afterAll(async () => {
  await server?.close()
  await database?.drop()
})

const exportsDir = (companyId: number) =>
  server.runInApp(Effect.gen(function*() {
    const store = yield* BlobStore
    return dirname(yield* Effect.orDie(store.absolute(store.newPath(companyId, "exports", ""))))
  }))

describe("export runner", () => {
  it("runs at most two exports at once and reports export.progress at most once a second", { timeout: 90_000 }, async () => {
    const company = await createCompany(server)
    const d = await seed(server, company)
    // Enough rows that one export outlasts a few progress periods.
    await query(server, `
      INSERT INTO messages (company_id, conversation_id, thread_id, channel_id, direction, message_content, "timestamp")
      SELECT m.company_id, m.conversation_id, m.thread_id, m.channel_id, m.direction, 'bulk ' || g, m."timestamp"
      FROM messages m, generate_series(1, 20000) g WHERE m.id = $1`, [d.messages.m1])
    const total = Number((await query(server, "SELECT count(*) AS n FROM messages WHERE company_id = $1 AND deleted_at IS NULL", [company.id]))[0].n)

    // Three at once, visible to the runner together; the third is small (only its start matters).
    const ids = (await query<{ id: number }>(server, `
      INSERT INTO exports (uuid, company_id, user_id, type, format, name, filters, created_at)
      SELECT gen_random_uuid(), $1, $2, t, 'xlsx', 'Bulk ' || g, '{}', now()
      FROM unnest(ARRAY['messages', 'messages', 'contacts']) WITH ORDINALITY AS x(t, g)
      RETURNING id`, [company.id, company.admin.id])).map((r) => Number(r.id)).sort((a, b) => a - b)
    await query(server, `
      INSERT INTO jobs (kind, company_id, payload) SELECT 'export.run', $1, jsonb_build_object('export_id', id)
      FROM unnest($2::bigint[]) id ORDER BY id`, [company.id, ids])
    await wake(server)
    const done = []
    for (const id of ids) done.push(await settled(server, company.token, id, 60_000))
    assert.deepStrictEqual(done.map((e) => [e.status, e.row_count]), [["completed", total], ["completed", total], ["completed", 3]])

    const runs = await query<{ id: number; started_at: Date; completed_at: Date }>(server,
      "SELECT id, started_at, completed_at FROM exports WHERE id = ANY($1::bigint[]) ORDER BY started_at, id", [ids])
    const [first, second, third] = runs
    // The first two ran side by side; the third waited for one of them.
    assert.isBelow(second.started_at.getTime(), first.completed_at.getTime(), "two exports run at once")
    assert.isAtLeast(third.started_at.getTime(), Math.min(first.completed_at.getTime(), second.completed_at.getTime()), "not three")
    assert.strictEqual(ExportJob.concurrency, 2)

    const progress = await query<{ payload: any; created_at: Date }>(server,
      "SELECT payload, created_at FROM events WHERE company_id = $1 AND key = 'export.progress' ORDER BY seq", [company.id])
    for (const run of runs.filter((r) => Number(r.id) !== ids[2])) {
      const mine = progress.filter((p) => p.payload.id === Number(run.id))
      const lasted = run.completed_at.getTime() - run.started_at.getTime()
      // Once a second at most, between batches (dozens a second here): never more than the seconds it
      // ran, never two within a second; some once it ran long enough (how long depends on the machine).
      if (lasted > 1500) assert.isAtLeast(mine.length, 1)
      assert.isAtMost(mine.length, Math.ceil(lasted / 1000))
      mine.forEach((p, i) => {
        assert.deepStrictEqual(Object.keys(p.payload).sort(), ["id", "row_count", "user_id", "uuid"])
        assert.strictEqual(p.payload.user_id, company.admin.id)
        assert.isTrue(p.payload.row_count > 0 && p.payload.row_count <= total)
        if (i > 0) {
          assert.isAbove(p.payload.row_count, mine[i - 1].payload.row_count)
          // The events' times are their transactions' starts, some time after the runner looked at its clock
          // (hundreds of milliseconds with other test files running beside this one); emitted per batch
          // they would be tens of milliseconds apart.
          assert.isAtLeast(p.created_at.getTime() - mine[i - 1].created_at.getTime(), 500)
        }
      })
    }
  })

  it("an export whose job gives up after its runners died ends failed, and its half-written files go", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const [row] = await query<{ id: number; uuid: string }>(server, `
      INSERT INTO exports (uuid, company_id, user_id, type, format, name, status, filters, row_count, created_at)
      VALUES (gen_random_uuid(), $1, $2, 'contacts', 'csv', 'Doomed', 'processing', '{}', 1000, now()) RETURNING id, uuid::text`,
      [company.id, company.admin.id])
    // Its last attempt's runner died too: the next claim is one too many.
    const [job] = await query<{ id: number }>(server, `
      INSERT INTO jobs (kind, company_id, payload, status, lease_owner, lease_until, attempts)
      VALUES ('export.run', $1, $2::jsonb, 'running', 'dead-runner', now() - interval '1 second', $3) RETURNING id`,
      [company.id, JSON.stringify({ export_id: Number(row.id) }), ExportJob.maxAttempts])
    const dir = await exportsDir(company.id)
    await mkdir(dir, { recursive: true })
    const leftovers = [`${dir}/${row.uuid}.dead-1.part`, `${dir}/${row.uuid}.dead-2.part`]
    for (const file of leftovers) await writeFile(file, "half")
    // Another export's file (of another company, even) is not touched.
    const otherDir = await exportsDir(other.id)
    await mkdir(otherDir, { recursive: true })
    await writeFile(`${otherDir}/${row.uuid}.other.part`, "not mine")

    await wake(server)
    const done = await settled(server, company.token, Number(row.id))
    assert.deepStrictEqual([done.status, done.error_message, done.download_url], ["failed", gaveUpMessage, null])
    const [after] = await query<{ status: string }>(server, "SELECT status FROM jobs WHERE id = $1", [job.id])
    assert.strictEqual(after.status, "failed")
    const failed = await payloadsOf(server, company.id, "export.failed")
    assert.deepStrictEqual(failed.map((p: any) => [p.id, p.user_id, p.error_message]), [[Number(row.id), company.admin.id, gaveUpMessage]])
    assert.isFalse(leftovers.some(existsSync))
    assert.isTrue(existsSync(`${otherDir}/${row.uuid}.other.part`))

    // Another company cannot see it.
    assert.strictEqual((await request(server, "GET", `/v1/exports/${row.id}`, { token: other.token })).status, 404)
  })
})

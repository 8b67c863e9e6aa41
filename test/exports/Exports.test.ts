import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll } from "vitest"
import { SignedUrls } from "../../src/platform/files/SignedUrls.ts"
import { BlobStore } from "../../src/platform/files/BlobStore.ts"
import { ExportJob } from "../../src/exports/Job.ts"
import { contactColumns, messageColumns } from "../../src/exports/Repo.ts"
import { addUser, mobileLogin } from "../auth/support.ts"
import { createSegment } from "../segments/support.ts"
import { payloadsOf, query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { whenAvailable } from "../support/Requires.ts"
import {
  createExport,
  expectedContacts,
  expectedMessages,
  fetchBytes,
  norm,
  parseCsv,
  parseXlsx,
  seed,
  settled,
  wake
} from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const neutral = (text: string) => (/^[=+\-@]/.test(text) ? `'${text}` : text)

/** The file's rows (header first) as text cells, whatever its format. */
const rowsOf = async (format: string, bytes: Buffer, columns: ReadonlyArray<string>): Promise<Array<Array<string>>> => {
  if (format === "csv") {
    assert.deepStrictEqual([...bytes.subarray(0, 3)], [0xef, 0xbb, 0xbf], "CSV starts with a UTF-8 BOM")
    return parseCsv(bytes.subarray(3).toString("utf8"))
  }
  if (format === "xlsx") {
    assert.strictEqual(bytes.subarray(0, 2).toString("latin1"), "PK")
    return (await parseXlsx(bytes)).map((row) => row.map(norm))
  }
  const parsed = JSON.parse(bytes.toString("utf8")) as Array<Record<string, unknown>>
  assert.isTrue(Array.isArray(parsed))
  return [[...columns], ...parsed.map((record) => {
    assert.deepStrictEqual(Object.keys(record), [...columns])
    return columns.map((c) => norm(record[c]))
  })]
}

const exportFile = async (token: string, id: number) => {
  const res = await fetchBytes(server, `/v1/exports/${id}/download`, token)
  assert.strictEqual(res.status, 200, res.bytes.toString())
  return res
}

const idsOf = async (token: string, id: number) => {
  const done = await settled(server, token, id)
  assert.strictEqual(done.status, "completed", JSON.stringify(done))
  const file = await exportFile(token, id)
  return JSON.parse(file.bytes.toString("utf8")).map((r: any) => r.id) as Array<number>
}

const path = (server: RunningServer, link: string) => {
  const url = new URL(link)
  return url.pathname + url.search
}

describe("exports", () => {
  it("writes each type in each format; the files read back equal the database row by row", async () => {
    const company = await createCompany(server)
    const data = await seed(server, company)
    const types = [
      { type: "contacts", filters: undefined, columns: contactColumns, ids: [data.contacts.alice, data.contacts.formula, data.contacts.carol] },
      { type: "messages", filters: undefined, columns: messageColumns, ids: Object.values(data.messages) },
      { type: "segments", filters: { segment_ids: [data.segments.vip, data.segments.beta] }, columns: contactColumns, ids: [data.contacts.alice, data.contacts.carol] }
    ]
    for (const { type, filters, columns, ids } of types) {
      const expected = type === "messages" ? await expectedMessages(server, company.id, ids) : await expectedContacts(server, company.id, ids)
      assert.strictEqual(expected.length, ids.length)
      for (const format of ["csv", "xlsx", "json"]) {
        const created = await request(server, "POST", "/v1/exports", { token: company.token, body: { type, format, filters } })
        assert.strictEqual(created.status, 201, JSON.stringify(created.body))
        assert.strictEqual(created.body.data.message, "Export queued.")
        const queued = created.body.data.export
        assert.deepStrictEqual([queued.status, queued.type, queued.format, queued.download_url, queued.row_count], ["pending", type, format, null, 0])
        assert.deepStrictEqual(Object.keys(queued).sort(), [
          "created_at", "download_url", "error_message", "expires_at", "file_size", "filters", "format", "id", "name", "row_count",
          "status", "type", "updated_at", "uuid"
        ])

        const done = await settled(server, company.token, queued.id)
        assert.strictEqual(done.status, "completed", JSON.stringify(done))
        assert.strictEqual(done.row_count, ids.length)
        const days = (Date.parse(done.expires_at) - Date.parse(done.updated_at)) / 86_400_000
        assert.isTrue(Math.abs(days - 7) < 0.01, `expires in 7 days, not ${days}`)

        const file = await exportFile(company.token, done.id)
        assert.strictEqual(done.file_size, file.bytes.length)
        assert.include(file.headers.get("content-disposition") ?? "", `.${format}`)
        // The signed link needs no Authorization header and serves the same bytes.
        const viaLink = await fetchBytes(server, path(server, done.download_url))
        assert.strictEqual(viaLink.status, 200)
        assert.isTrue(viaLink.bytes.equals(file.bytes))

        const rows = await rowsOf(format, file.bytes, columns)
        assert.deepStrictEqual(rows[0], [...columns], `${type}/${format} header`)
        assert.strictEqual(rows.length - 1, expected.length, `${type}/${format} row count`)
        expected.forEach((row: any, i: number) => {
          const want = columns.map((c) => norm(row[c]))
          const shown = format === "csv" ? want.map(neutral) : format === "xlsx" ? want.map((v) => v.replace(/\r\n/g, "\n")) : want
          assert.deepStrictEqual(rows[i + 1], shown, `${type}/${format} row ${i}`)
        })
      }
    }

    // Flattening, and formula neutralisation in CSV only.
    const contactsCsv = (await request(server, "GET", "/v1/exports?perPage=100", { token: company.token })).body.data.items
      .find((e: any) => e.type === "contacts" && e.format === "csv")
    const csv = parseCsv((await exportFile(company.token, contactsCsv.id)).bytes.subarray(3).toString("utf8"))
    const col = (name: string) => contactColumns.indexOf(name as any)
    const alice = csv.find((r) => r[0] === String(data.contacts.alice))!
    assert.deepStrictEqual([alice[col("phones")], alice[col("emails")], alice[col("tags")], alice[col("accounts")]], [
      "'+7 916 000 0001; 8 800 555", "alice@example.test", "beta; vip", "msgr_a:a-1"
    ])
    const trick = csv.find((r) => r[0] === String(data.contacts.formula))!
    assert.deepStrictEqual([trick[col("display_name")], trick[col("first_name")], trick[col("last_name")], trick[col("company_name")]], [
      "'=SUM(A1:A2)", "'+1 trick", "'-minus", "'@corp"
    ])
    const carol = csv.find((r) => r[0] === String(data.contacts.carol))!
    assert.deepStrictEqual([carol[col("display_name")], carol[col("first_name")]], ["Carol, \"the\" Third\nline2", "Ünïcødé 🎉"])

    const completed = await payloadsOf(server, company.id, "export.completed")
    assert.strictEqual(completed.length, 9)
    // The creator (here the company's service account) hears of it on its private-user channel: user_id is a number.
    const creators = await query<{ user_id: string }>(server, "SELECT DISTINCT user_id FROM exports WHERE company_id = $1", [company.id])
    assert.strictEqual(creators.length, 1)
    assert.isTrue(completed.every((p: any) => p.user_id === Number(creators[0].user_id) && p.row_count > 0), JSON.stringify(completed[0]))
    assert.strictEqual(ExportJob.concurrency, 2)
  })

  whenAvailable({ programs: ["soffice"] }, "the XLSX export in LibreOffice", () =>
  it("an XLSX export opens in LibreOffice: its CSV conversion equals the database row by row", { timeout: 60_000 }, async () => {
    const company = await createCompany(server)
    const data = await seed(server, company)
    const dir = await mkdtemp(join(tmpdir(), "exports-soffice-"))
    try {
      const types = [
        { type: "contacts", columns: contactColumns, expected: await expectedContacts(server, company.id, Object.values(data.contacts)) },
        { type: "messages", columns: messageColumns, expected: await expectedMessages(server, company.id, Object.values(data.messages)) }
      ]
      for (const { type } of types) {
        const done = await settled(server, company.token, (await createExport(server, company.token, { type, format: "xlsx" })).id)
        await writeFile(join(dir, `${type}.xlsx`), (await exportFile(company.token, done.id)).bytes)
      }
      // Its own profile directory: a first run creates it, and runs in parallel must not share one.
      await promisify(execFile)("soffice", [
        `-env:UserInstallation=file://${dir}/profile`, "--headless", "--convert-to", "csv:Text - txt - csv (StarCalc):44,34,76,1",
        "--outdir", dir, ...types.map(({ type }) => join(dir, `${type}.xlsx`))
      ], { timeout: 50_000 })
      for (const { columns, expected, type } of types) {
        const rows = parseCsv(await readFile(join(dir, `${type}.csv`), "utf8"), "\n")
        assert.deepStrictEqual(rows, [
          [...columns],
          ...expected.map((row: any) => columns.map((c) => norm(row[c]).replace(/\r\n/g, "\n")))
        ], type)
      }
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  }))

  it("filters narrow messages by date, channel, direction, conversation and group chat; contacts by account type; segments by segment", async () => {
    const company = await createCompany(server)
    const d = await seed(server, company)
    const { m1, m2, m3, m4 } = d.messages
    const cases: Array<[Record<string, unknown>, Array<number>]> = [
      [{ date_from: "2026-01-11", date_to: "2026-01-12" }, [m2, m3]],
      [{ channel_id: d.channels.b }, [m3, m4]],
      [{ direction: "outbound" }, [m2, m4]],
      [{ conversation_id: d.conversations.alice }, [m1, m2]],
      [{ group_chat_id: d.group }, [m4]]
    ]
    for (const [filters, want] of cases) {
      const created = await createExport(server, company.token, { type: "messages", format: "json", filters })
      assert.deepStrictEqual(created.filters, filters)
      assert.deepStrictEqual(await idsOf(company.token, created.id), want, JSON.stringify(filters))
    }
    const byAccount = await createExport(server, company.token, { type: "contacts", format: "json", filters: { account_type: "msgr_b" } })
    assert.deepStrictEqual(await idsOf(company.token, byAccount.id), [d.contacts.formula])
    const bySegment = await createExport(server, company.token, { type: "segments", format: "json", filters: { segment_id: d.segments.vip } })
    assert.deepStrictEqual(await idsOf(company.token, bySegment.id), [d.contacts.alice])
  })

  it("rejects bad input with 422 and creates nothing", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const mine = await seed(server, company)
    const theirs = await seed(server, other)
    const post = (body: unknown) => request(server, "POST", "/v1/exports", { token: company.token, body })
    for (const body of [{ format: "csv" }, { type: "contacts" }, { type: "deals", format: "csv" }, { type: "contacts", format: "pdf" }]) {
      assert.strictEqual((await post(body)).status, 422, JSON.stringify(body))
    }
    const invalid = async (filters: Record<string, unknown>, field: string, type = "messages") => {
      const res = await post({ type, format: "csv", filters })
      assert.strictEqual(res.status, 422, JSON.stringify(res.body))
      assert.includeMembers(Object.keys(res.body.errors ?? {}), [field], JSON.stringify(res.body))
    }
    await invalid({ segment_id: theirs.segments.vip }, "filters.segment_id", "segments")
    await invalid({ segment_ids: [mine.segments.vip, theirs.segments.beta] }, "filters.segment_ids", "segments")
    await invalid({}, "filters.segment_id", "segments")
    await invalid({ channel_id: theirs.channels.a }, "filters.channel_id")
    await invalid({ conversation_id: theirs.conversations.alice }, "filters.conversation_id")
    await invalid({ group_chat_id: mine.group + 1_000_000 }, "filters.group_chat_id")
    await invalid({ date_from: "2026-02-02", date_to: "2026-02-01" }, "filters.date_to")
    await invalid({ date_from: "yesterday" }, "filters.date_from")
    const direction = await post({ type: "messages", format: "csv", filters: { direction: "sideways" } })
    assert.strictEqual(direction.status, 422)
    assert.isTrue(Object.keys(direction.body.errors).some((k) => k.includes("direction")), JSON.stringify(direction.body))
    const account = await post({ type: "contacts", format: "csv", filters: { account_type: "fax" } })
    assert.strictEqual(account.status, 422)

    for (const q of ["perPage=4", "perPage=101", "page=0"]) {
      assert.strictEqual((await request(server, "GET", `/v1/exports?${q}`, { token: company.token })).status, 422, q)
    }
    const list = await request(server, "GET", "/v1/exports", { token: company.token })
    assert.deepStrictEqual([list.status, list.body.data.items, list.body.data.pagination.total, list.body.data.pagination.perPage], [200, [], 0, 20])
    // Same-day, same-company valid filters pass.
    await createExport(server, company.token, { type: "messages", format: "csv", filters: { date_from: "2026-01-12", date_to: "2026-01-12", group_chat_id: mine.group } })
  })

  it("allows 20 exports per company per UTC day, 5 of them messages; deleting one does not give it back", async () => {
    const company = await createCompany(server)
    const post = (type: string) => request(server, "POST", "/v1/exports", { token: company.token, body: { type, format: "json" } })
    for (let i = 0; i < 5; i++) assert.strictEqual((await post("messages")).status, 201)
    const sixth = await post("messages")
    assert.deepStrictEqual([sixth.status, Object.keys(sixth.body.errors)], [422, ["type"]])
    for (let i = 0; i < 15; i++) assert.strictEqual((await post("contacts")).status, 201)
    const over = await post("contacts")
    assert.deepStrictEqual([over.status, over.body.errors], [422, { type: ["The daily limit of 20 exports has been reached."] }])

    const page2 = await request(server, "GET", "/v1/exports?perPage=5&page=2", { token: company.token })
    assert.deepStrictEqual([page2.body.data.items.length, page2.body.data.pagination.total, page2.body.data.pagination.lastPage], [5, 20, 4])
    const first = (await request(server, "GET", "/v1/exports?perPage=5", { token: company.token })).body.data.items[0]
    assert.strictEqual((await request(server, "DELETE", `/v1/exports/${first.id}`, { token: company.token })).status, 200)
    assert.strictEqual((await post("contacts")).status, 422)

    // Yesterday's exports do not count today.
    await query(server, "UPDATE exports SET created_at = created_at - interval '1 day' WHERE company_id = $1", [company.id])
    assert.strictEqual((await post("messages")).status, 201)
  })

  it("without the Business plan feature every route answers 403 feature_not_available", async () => {
    const company = await createCompany(server, { plan: "free" })
    const expected = { message: "Your plan does not include the exports feature.", error: "feature_not_available", feature: "exports", required_plan: "business" }
    for (const [method, route, body] of [
      ["GET", "/v1/exports", undefined],
      ["POST", "/v1/exports", { type: "contacts", format: "csv" }],
      ["GET", "/v1/exports/1", undefined],
      ["GET", "/v1/exports/1/download", undefined],
      ["DELETE", "/v1/exports/1", undefined]
    ] as const) {
      const res = await request(server, method, route, { token: company.token, body })
      assert.deepStrictEqual([res.status, res.body], [403, expected], `${method} ${route}`)
    }
  })

  it("an agent without export permissions gets 403", async () => {
    const company = await createCompany(server)
    const agent = await addUser(server, company.id, { role: "agent" })
    const token = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
    assert.strictEqual((await request(server, "GET", "/v1/exports", { token })).status, 403)
    assert.strictEqual((await request(server, "POST", "/v1/exports", { token, body: { type: "contacts", format: "csv" } })).status, 403)
  })

  it("another company's export answers 404 on every route, the signed one included", async () => {
    const owner = await createCompany(server)
    const other = await createCompany(server)
    const created = await createExport(server, owner.token, { type: "contacts", format: "csv" })
    const done = await settled(server, owner.token, created.id)
    assert.strictEqual(done.status, "completed")
    for (const [method, route] of [["GET", `/v1/exports/${done.id}`], ["GET", `/v1/exports/${done.id}/download`], ["DELETE", `/v1/exports/${done.id}`]] as const) {
      assert.strictEqual((await request(server, method, route, { token: other.token })).status, 404, `${method} ${route}`)
    }
    assert.deepStrictEqual((await request(server, "GET", "/v1/exports", { token: other.token })).body.data.items, [])
    const foreign = await server.runInApp(Effect.gen(function*() {
      const signed = yield* SignedUrls
      return signed.sign(`/v1/exports/${done.id}/file`, { params: { c: String(other.id) }, expiresAt: Date.now() / 1000 + 600 })
    }))
    assert.strictEqual((await fetchBytes(server, path(server, foreign))).status, 404)
    // Still there for its owner.
    assert.strictEqual((await exportFile(owner.token, done.id)).status, 200)
  })

  it("download is 404 until completed; a job left processing by a dead runner is adopted once its lease expires", async () => {
    const company = await createCompany(server)
    const d = await seed(server, company)
    const [row] = await query<{ id: number; uuid: string }>(server, `
      INSERT INTO exports (uuid, company_id, user_id, type, format, name, status, filters, row_count, created_at)
      VALUES (gen_random_uuid(), $1, $2, 'messages', 'csv', 'Half done', 'processing', '{}', 1000, now()) RETURNING id, uuid::text`,
      [company.id, company.admin.id])
    const [job] = await query<{ id: number }>(server, `
      INSERT INTO jobs (kind, company_id, payload, status, lease_owner, lease_until, attempts)
      VALUES ('export.run', $1, $2::jsonb, 'running', 'dead-runner', now() + interval '1 hour', 1) RETURNING id`,
      [company.id, JSON.stringify({ export_id: Number(row.id) })])

    const pending = await request(server, "GET", `/v1/exports/${row.id}`, { token: company.token })
    assert.deepStrictEqual([pending.body.data.export.status, pending.body.data.export.download_url], ["processing", null])
    assert.strictEqual((await request(server, "GET", `/v1/exports/${row.id}/download`, { token: company.token })).status, 404)

    // The dead runner's half-written file.
    const dir = await server.runInApp(Effect.gen(function*() {
      const store = yield* BlobStore
      return dirname(yield* Effect.orDie(store.absolute(store.newPath(company.id, "exports", ""))))
    }))
    await mkdir(dir, { recursive: true })
    const leftover = join(dir, `${row.uuid}.dead-runner.part`)
    await writeFile(leftover, "1,half")

    // The runner died: its lease runs out, and this runner takes the job over.
    await query(server, "UPDATE jobs SET lease_until = now() - interval '1 second' WHERE id = $1", [job.id])
    await wake(server)
    const done = await settled(server, company.token, Number(row.id))
    assert.deepStrictEqual([done.status, done.row_count], ["completed", 4])
    const rows = parseCsv((await exportFile(company.token, done.id)).bytes.subarray(3).toString("utf8"))
    assert.deepStrictEqual(rows.slice(1).map((r) => Number(r[0])), Object.values(d.messages))
    const [after] = await query<{ status: string; attempts: number; lease_owner: string | null }>(server, "SELECT status, attempts, lease_owner FROM jobs WHERE id = $1", [job.id])
    assert.deepStrictEqual(after, { status: "finished", attempts: 2, lease_owner: null })
    assert.isFalse(existsSync(leftover), "the dead runner's .part file is gone")
    assert.deepStrictEqual((await readdir(dir)).filter((name) => name.startsWith(row.uuid)), [])
  })

  it("signed links stop at expires_at; expired exports show expired and the sweep removes their file", async () => {
    const company = await createCompany(server)
    await seed(server, company)
    const created = await createExport(server, company.token, { type: "contacts", format: "xlsx", name: "Everyone" })
    const done = await settled(server, company.token, created.id)
    assert.deepStrictEqual([done.status, done.name], ["completed", "Everyone"])
    const link = new URL(done.download_url)
    assert.strictEqual(link.searchParams.get("expires"), String(Math.floor(Date.parse(done.expires_at) / 1000)))
    assert.include((await fetchBytes(server, path(server, done.download_url))).headers.get("content-disposition") ?? "", "Everyone.xlsx")

    const stale = await server.runInApp(Effect.gen(function*() {
      const signed = yield* SignedUrls
      return signed.sign(`/v1/exports/${done.id}/file`, { params: { c: String(company.id) }, expiresAt: Date.now() / 1000 - 1 })
    }))
    assert.strictEqual((await fetchBytes(server, path(server, stale))).status, 403)
    const tampered = path(server, done.download_url).replace(`/${done.id}/`, `/${done.id + 1}/`)
    assert.strictEqual((await fetchBytes(server, tampered)).status, 403)

    const [{ file_path }] = await query<{ file_path: string }>(server, "SELECT file_path FROM exports WHERE id = $1", [done.id])
    const size = () => server.runInApp(Effect.gen(function*() {
      const store = yield* BlobStore
      return yield* Effect.orDie(store.size(file_path))
    }))
    assert.isTrue(Option.isSome(await size()))

    await query(server, "UPDATE exports SET expires_at = now() - interval '1 second' WHERE id = $1", [done.id])
    const expired = (await request(server, "GET", `/v1/exports/${done.id}`, { token: company.token })).body.data.export
    assert.deepStrictEqual([expired.status, expired.download_url], ["expired", null])
    assert.strictEqual((await request(server, "GET", `/v1/exports/${done.id}/download`, { token: company.token })).status, 404)
    assert.strictEqual((await fetchBytes(server, path(server, done.download_url))).status, 404)

    // The sweep job was queued for expires_at; bring it forward.
    const moved = await query(server, "UPDATE jobs SET run_after = now() WHERE kind = 'export.expire' AND company_id = $1 AND (payload->>'export_id')::bigint = $2 RETURNING id", [company.id, done.id])
    assert.strictEqual(moved.length, 1)
    await wake(server)
    for (let i = 0; i < 200; i++) {
      const [row] = await query<{ status: string }>(server, "SELECT status FROM exports WHERE id = $1", [done.id])
      if (row.status === "expired") break
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    assert.strictEqual((await query(server, "SELECT status FROM exports WHERE id = $1", [done.id]))[0].status, "expired")
    assert.isTrue(Option.isNone(await size()))
  })

  it("a failing export ends failed with error_message and tells its creator", async () => {
    const company = await createCompany(server)
    const [row] = await query<{ id: number }>(server, `
      INSERT INTO exports (uuid, company_id, user_id, type, format, name, filters, created_at)
      VALUES (gen_random_uuid(), $1, $2, 'messages', 'json', 'Broken', '{"date_from":"not a date"}', now()) RETURNING id`, [company.id, company.admin.id])
    await query(server, "INSERT INTO jobs (kind, company_id, payload) VALUES ('export.run', $1, $2::jsonb)", [company.id, JSON.stringify({ export_id: Number(row.id) })])
    await wake(server)
    const done = await settled(server, company.token, Number(row.id))
    assert.deepStrictEqual([done.status, done.error_message, done.download_url], ["failed", "The export stopped on an internal error.", null])
    assert.strictEqual((await request(server, "GET", `/v1/exports/${row.id}/download`, { token: company.token })).status, 404)
    const failed = await payloadsOf(server, company.id, "export.failed")
    assert.deepStrictEqual(failed.map((p: any) => [p.id, p.user_id, p.error_message]), [[Number(row.id), company.admin.id, done.error_message]])
  })

  it("delete removes the export and its file", async () => {
    const company = await createCompany(server)
    const segment = await createSegment(server, company.token, { name: "Nobody", conditions: [] })
    const created = await createExport(server, company.token, { type: "segments", format: "csv", filters: { segment_id: segment.id } })
    const done = await settled(server, company.token, created.id)
    assert.deepStrictEqual([done.status, done.row_count], ["completed", 0])
    assert.strictEqual(parseCsv((await exportFile(company.token, done.id)).bytes.subarray(3).toString("utf8")).length, 1)
    const [{ file_path }] = await query<{ file_path: string }>(server, "SELECT file_path FROM exports WHERE id = $1", [done.id])
    const removed = await request(server, "DELETE", `/v1/exports/${done.id}`, { token: company.token })
    assert.deepStrictEqual([removed.status, removed.body], [200, { data: { message: "Export deleted." } }])
    assert.strictEqual((await request(server, "GET", `/v1/exports/${done.id}`, { token: company.token })).status, 404)
    assert.strictEqual((await request(server, "DELETE", `/v1/exports/${done.id}`, { token: company.token })).status, 404)
    assert.strictEqual((await fetchBytes(server, path(server, done.download_url))).status, 404)
    const size = await server.runInApp(Effect.gen(function*() {
      const store = yield* BlobStore
      return yield* Effect.orDie(store.size(file_path))
    }))
    assert.isTrue(Option.isNone(size))
  })
})

import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { createExport, fetchBytes, parseCsv, settled, wake } from "../exports/support.ts"
import { estimate } from "../segments/support.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { createContact, getContact } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const patch = (token: string, id: number, body: Record<string, unknown>) =>
  request(server, "PATCH", `/v1/contacts/${id}`, { token, body })

describe("contact custom fields", () => {
  it("are written on create, read by GET, list and lookup, and merged by PATCH (null removes a key)", async () => {
    const company = await createCompany(server)
    const created = await createContact(server, company.token, {
      firstName: "Ann",
      phones: [{ phone: "+14155550111" }],
      custom_fields: { plan: "pro", seats: 12, vip: true, gone: null }
    })
    assert.deepStrictEqual(created.custom_fields, { plan: "pro", seats: 12, vip: true })
    const plain = await createContact(server, company.token, { firstName: "Bob" })
    assert.deepStrictEqual(plain.custom_fields, {})

    assert.deepStrictEqual((await getContact(server, company.token, created.id)).body.data.custom_fields, created.custom_fields)
    const listed = await request(server, "GET", "/v1/contacts", { token: company.token })
    const byId = new Map(listed.body.data.items.map((c: any) => [c.id, c.custom_fields]))
    assert.deepStrictEqual([byId.get(created.id), byId.get(plain.id)], [created.custom_fields, {}])
    const looked = await request(server, "GET", "/v1/contacts/lookup?q=4155550111", { token: company.token })
    assert.deepStrictEqual(looked.body.data.map((c: any) => c.custom_fields), [created.custom_fields])

    const merged = await patch(company.token, created.id, { custom_fields: { seats: 20, vip: null, city: "Almaty" } })
    assert.strictEqual(merged.status, 200, JSON.stringify(merged.body))
    assert.deepStrictEqual(merged.body.data.custom_fields, { plan: "pro", seats: 20, city: "Almaty" })
    const untouched = await patch(company.token, created.id, { lastName: "Lee" })
    assert.deepStrictEqual(untouched.body.data.custom_fields, { plan: "pro", seats: 20, city: "Almaty" })
    const cleared = await patch(company.token, created.id, { custom_fields: null })
    assert.deepStrictEqual(cleared.body.data.custom_fields, {})
  })

  it("refuses bad names, values and counts with 422 naming the field, and writes nothing", async () => {
    const company = await createCompany(server)
    const post = (custom_fields: unknown) => request(server, "POST", "/v1/contacts", { token: company.token, body: { firstName: "X", custom_fields } })
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [{ "bad key": 1 }, "custom_fields.bad key"],
      [{ ".dot": 1 }, "custom_fields..dot"],
      [{ [`k${"x".repeat(64)}`]: 1 }, `custom_fields.k${"x".repeat(64)}`],
      [{ nested: { a: 1 } }, "custom_fields.nested"],
      [{ list: [1] }, "custom_fields.list"],
      [{ long: "y".repeat(256) }, "custom_fields.long"],
      [Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, i])), "custom_fields"],
      [["a"], "custom_fields"],
      ["text", "custom_fields"]
    ]
    for (const [fields, key] of cases) {
      const res = await post(fields)
      assert.strictEqual(res.status, 422, JSON.stringify(res.body))
      assert.deepStrictEqual(Object.keys(res.body.errors), [key], JSON.stringify(res.body))
    }
    assert.strictEqual((await request(server, "GET", "/v1/contacts", { token: company.token })).body.data.pagination.total, 0)
    assert.strictEqual((await post({ ok: "y".repeat(255) })).status, 201)

    const full = await createContact(server, company.token, {
      firstName: "Full",
      custom_fields: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, i]))
    })
    const over = await patch(company.token, full.id, { custom_fields: { one_more: 1 } })
    assert.strictEqual(over.status, 422)
    assert.deepStrictEqual(Object.keys(over.body.errors), ["custom_fields"])
    const swapped = await patch(company.token, full.id, { custom_fields: { k0: null, one_more: 1 } })
    assert.strictEqual(swapped.status, 200, JSON.stringify(swapped.body))
    assert.strictEqual(Object.keys(swapped.body.data.custom_fields).length, 50)
    assert.strictEqual(swapped.body.data.custom_fields.one_more, 1)
  })

  it("another company's contact is 404 on PATCH and keeps its fields", async () => {
    const owner = await createCompany(server)
    const other = await createCompany(server)
    const contact = await createContact(server, owner.token, { firstName: "Own", custom_fields: { plan: "pro" } })
    const res = await patch(other.token, contact.id, { custom_fields: { plan: "free" } })
    assert.strictEqual(res.status, 404)
    assert.strictEqual((await getContact(server, other.token, contact.id)).status, 404)
    assert.deepStrictEqual((await getContact(server, owner.token, contact.id)).body.data.custom_fields, { plan: "pro" })
  })

  it("segments on a custom field estimate the contacts written through the API, and follow a PATCH", async () => {
    const company = await createCompany(server)
    const pro = await createContact(server, company.token, { firstName: "P1", custom_fields: { plan: "pro", seats: 5 } })
    await createContact(server, company.token, { firstName: "P2", custom_fields: { plan: "pro", seats: 50 } })
    const free = await createContact(server, company.token, { firstName: "F", custom_fields: { plan: "free" } })
    await createContact(server, company.token, { firstName: "None" })
    const onPlan = (value: string) => [{ type: "custom", field_name: "custom_fields.plan", operator: "is", value }]
    assert.strictEqual(await estimate(server, company.token, onPlan("pro")), 2)
    assert.strictEqual(await estimate(server, company.token, onPlan("free")), 1)
    assert.strictEqual(await estimate(server, company.token, [{ type: "custom", field_name: "seats", operator: "is", value: "50" }]), 1)
    assert.strictEqual(await estimate(server, company.token, [{ type: "custom", field_name: "plan", operator: "is_empty" }]), 1)

    await patch(company.token, free.id, { custom_fields: { plan: "pro" } })
    await patch(company.token, pro.id, { custom_fields: { plan: null } })
    assert.strictEqual(await estimate(server, company.token, onPlan("pro")), 2)
    assert.strictEqual(await estimate(server, company.token, [{ type: "custom", field_name: "plan", operator: "is_empty" }]), 2)
    // Another company's contacts never count.
    const other = await createCompany(server)
    assert.strictEqual(await estimate(server, other.token, onPlan("pro")), 0)
  })

  it("a contacts export carries the custom fields as JSON", async () => {
    const company = await createCompany(server)
    const contact = await createContact(server, company.token, { firstName: "Exp", custom_fields: { plan: "pro", seats: 3 } })
    const created = await createExport(server, company.token, { type: "contacts", format: "csv" })
    await wake(server)
    const done = await settled(server, company.token, created.id)
    assert.strictEqual(done.status, "completed", JSON.stringify(done))
    const file = await fetchBytes(server, `/v1/exports/${created.id}/download`, company.token)
    const [header, ...rows] = parseCsv(file.bytes.subarray(3).toString("utf8"))
    const row = rows.find((r) => r[0] === String(contact.id))!
    assert.deepStrictEqual(JSON.parse(row[header.indexOf("custom_fields")]), { plan: "pro", seats: 3 })
  })
})

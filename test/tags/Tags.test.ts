import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { createContact, getContact } from "../contacts/support.ts"
import { eventsOf } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const createTag = async (token: string, name: string) => {
  const res = await request(server, "POST", "/v1/tags", { token, body: { name } })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.data
}

describe("tags", () => {
  it("creates, lists by name, reads, renames and deletes tags; names are unique per company ignoring case", async () => {
    const company = await createCompany(server)
    const vip = await createTag(company.token, " VIP ")
    assert.deepStrictEqual(Object.keys(vip).sort(), ["company_id", "contacts_count", "created_at", "id", "name", "updated_at"])
    assert.deepStrictEqual([vip.name, vip.company_id, vip.contacts_count], ["VIP", company.id, 0])
    const alpha = await createTag(company.token, "alpha")

    const dup = await request(server, "POST", "/v1/tags", { token: company.token, body: { name: "vip" } })
    assert.deepStrictEqual([dup.status, dup.body.errors], [422, { name: ["The name has already been taken."] }])
    assert.strictEqual((await request(server, "POST", "/v1/tags", { token: company.token, body: { name: " " } })).status, 422)

    const listed = await request(server, "GET", "/v1/tags", { token: company.token })
    assert.deepStrictEqual(listed.body.data.map((t: any) => t.name), ["alpha", "VIP"])
    assert.deepStrictEqual((await request(server, "GET", `/v1/tags/${vip.id}`, { token: company.token })).body.data, vip)

    const renamed = await request(server, "PATCH", `/v1/tags/${vip.id}`, { token: company.token, body: { name: "vip" } })
    assert.deepStrictEqual([renamed.status, renamed.body.data.name], [200, "vip"])
    const clash = await request(server, "PATCH", `/v1/tags/${vip.id}`, { token: company.token, body: { name: "ALPHA" } })
    assert.deepStrictEqual([clash.status, clash.body.errors], [422, { name: ["The name has already been taken."] }])

    // Another company may use the same name.
    const other = await createCompany(server)
    await createTag(other.token, "vip")

    const removed = await request(server, "DELETE", `/v1/tags/${alpha.id}`, { token: company.token })
    assert.deepStrictEqual([removed.status, removed.body], [200, { data: { message: "Tag deleted." } }])
    assert.strictEqual((await request(server, "GET", `/v1/tags/${alpha.id}`, { token: company.token })).status, 404)
  })

  it("an agent may read tags but not create, rename or delete them", async () => {
    const company = await createCompany(server)
    const tag = await createTag(company.token, "support")
    const agent = await addUser(server, company.id, { role: "agent" })
    const token = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
    assert.strictEqual((await request(server, "GET", "/v1/tags", { token })).status, 200)
    assert.strictEqual((await request(server, "POST", "/v1/tags", { token, body: { name: "x" } })).status, 403)
    assert.strictEqual((await request(server, "PATCH", `/v1/tags/${tag.id}`, { token, body: { name: "x" } })).status, 403)
    assert.strictEqual((await request(server, "DELETE", `/v1/tags/${tag.id}`, { token })).status, 403)
  })

  it("POST /v1/contacts/{id}/tags replaces the contact's tags and answers data.tags", async () => {
    const company = await createCompany(server)
    const a = await createTag(company.token, "beta")
    const b = await createTag(company.token, "Alpha")
    const c = await createTag(company.token, "gamma")
    const contact = await createContact(server, company.token, { firstName: "Tagged" })

    const first = await request(server, "POST", `/v1/contacts/${contact.id}/tags`, { token: company.token, body: { tag_ids: [a.id, b.id, a.id] } })
    assert.strictEqual(first.status, 200, JSON.stringify(first.body))
    assert.deepStrictEqual(first.body.data.tags, [{ id: b.id, name: "Alpha" }, { id: a.id, name: "beta" }])
    const second = await request(server, "POST", `/v1/contacts/${contact.id}/tags`, { token: company.token, body: { tag_ids: [c.id] } })
    assert.deepStrictEqual(second.body.data.tags, [{ id: c.id, name: "gamma" }])
    assert.deepStrictEqual((await getContact(server, company.token, contact.id)).body.data.tags, [{ id: c.id, name: "gamma" }])
    assert.strictEqual((await request(server, "GET", `/v1/tags/${c.id}`, { token: company.token })).body.data.contacts_count, 1)

    const updates = await eventsOf(server, company.id, "contact.updated")
    assert.deepStrictEqual(updates.at(-1)!.payload.changes, ["tags"])

    // Deleting a tag takes it off its contacts.
    await request(server, "DELETE", `/v1/tags/${c.id}`, { token: company.token })
    assert.deepStrictEqual((await getContact(server, company.token, contact.id)).body.data.tags, [])

    const cleared = await request(server, "POST", `/v1/contacts/${contact.id}/tags`, { token: company.token, body: { tag_ids: [] } })
    assert.deepStrictEqual([cleared.status, cleared.body.data.tags], [200, []])
    assert.strictEqual((await request(server, "POST", `/v1/contacts/${contact.id}/tags`, { token: company.token, body: {} })).status, 422)
  })

  it("another company's tag is 404 on every tag route and invalid as a contact tag", async () => {
    const owner = await createCompany(server)
    const other = await createCompany(server)
    const tag = await createTag(owner.token, "private")
    for (const [method, body] of [["GET"], ["PATCH", { name: "stolen" }], ["DELETE"]] as const) {
      const res = await request(server, method, `/v1/tags/${tag.id}`, { token: other.token, body })
      assert.deepStrictEqual([res.status, res.body], [404, { message: "Tag not found." }], method)
    }
    assert.deepStrictEqual((await request(server, "GET", "/v1/tags", { token: other.token })).body.data, [])
    const contact = await createContact(server, other.token, { firstName: "Mine" })
    const own = await createTag(other.token, "own")
    const res = await request(server, "POST", `/v1/contacts/${contact.id}/tags`, { token: other.token, body: { tag_ids: [own.id, tag.id] } })
    assert.deepStrictEqual([res.status, res.body.errors], [422, { "tag_ids.1": ["The selected tag_ids.1 is invalid."] }])
    assert.strictEqual((await request(server, "GET", `/v1/tags/${tag.id}`, { token: owner.token })).body.data.name, "private")
  })
})

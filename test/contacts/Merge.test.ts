import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { createChannel, inbound } from "../messages/support.ts"
import { eventsOf, query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { createContact, getContact } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const contactOf = async (conversationId: number) => {
  const [row] = await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [conversationId])
  return row?.contact_id
}

const merge = (token: string, sourceId: number, body: Record<string, unknown>) =>
  request(server, "POST", `/v1/contacts/${sourceId}/merge`, { token, body })

describe("merge", () => {
  it("moves the conversation (threads and messages) and accounts to a target without one; the source is soft-deleted", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    const received = await inbound(server, company.token, channelId, { from: { external_id: "m-1", name: "Dup Licate" } })
    await inbound(server, company.token, channelId, { from: { external_id: "m-1" }, text: "second" })
    const sourceId = await contactOf(received.conversation_id)
    const target = await createContact(server, company.token, { firstName: "Real", phones: [{ phone: "+14155550123" }] })

    const res = await merge(company.token, sourceId, { target_contact_id: target.id })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    const data = res.body.data
    assert.deepStrictEqual(
      [data.message, data.dry_run, data.source_contact_id, data.target_contact_id],
      ["Contact merged.", false, sourceId, target.id]
    )
    assert.deepStrictEqual(data.moved, { conversations: 1, threads: 1, messages: 2, contactAccounts: 1, tags: 0, phones: 0, emailes: 0 })
    assert.strictEqual(await contactOf(received.conversation_id), target.id)
    assert.deepStrictEqual(data.contact.contactAccounts.map((a: any) => a.external_id), ["m-1"])
    assert.strictEqual(data.contact.firstName, "Real")
    // The target kept its own name and took the source's empty-on-target last name.
    assert.strictEqual(data.contact.lastName, "Licate")

    const source = await getContact(server, company.token, sourceId)
    assert.strictEqual(source.status, 200)
    assert.strictEqual(source.body.data.merged_into_contact_id, target.id)
    assert.strictEqual((await request(server, "PATCH", `/v1/contacts/${sourceId}`, { token: company.token, body: { firstName: "x" } })).status, 404)
    const listed = await request(server, "GET", "/v1/contacts", { token: company.token })
    assert.deepStrictEqual(listed.body.data.items.map((c: any) => c.id), [target.id])

    // The person's next message lands in the target's conversation.
    const next = await inbound(server, company.token, channelId, { from: { external_id: "m-1" }, text: "third" })
    assert.strictEqual(next.conversation_id, received.conversation_id)

    const [event] = await eventsOf(server, company.id, "contact.merged")
    assert.deepStrictEqual(
      [event.payload.source_contact_id, event.payload.target_contact_id, event.payload.moved.messages],
      [sourceId, target.id, 2]
    )
  })

  it("joins the source's threads and messages into the target's own conversation and unions tags, phones and e-mails", async () => {
    const company = await createCompany(server)
    const tg = await createChannel(server, company.token, "msgr_b")
    const wa = await createChannel(server, company.token, "msgr_a")
    const sourceMsg = await inbound(server, company.token, tg, { from: { external_id: "src" } })
    const targetMsg = await inbound(server, company.token, wa, { from: { external_id: "15550001" } })
    const sourceId = await contactOf(sourceMsg.conversation_id)
    const targetId = await contactOf(targetMsg.conversation_id)
    const tagA = (await request(server, "POST", "/v1/tags", { token: company.token, body: { name: "a" } })).body.data
    const tagB = (await request(server, "POST", "/v1/tags", { token: company.token, body: { name: "b" } })).body.data
    await request(server, "POST", `/v1/contacts/${sourceId}/tags`, { token: company.token, body: { tag_ids: [tagA.id, tagB.id] } })
    await request(server, "POST", `/v1/contacts/${targetId}/tags`, { token: company.token, body: { tag_ids: [tagA.id] } })
    await request(server, "PATCH", `/v1/contacts/${sourceId}`, {
      token: company.token,
      body: { phones: [{ phone: "+14155550123" }, { phone: "+14155550999" }], emailes: [{ email: "Same@example.test" }] }
    })
    await request(server, "PATCH", `/v1/contacts/${targetId}`, {
      token: company.token,
      body: { phones: [{ phone: "14155550123" }], emailes: [{ email: "same@example.test" }] }
    })
    // As an inbound provider may have stored it: the same number in another spelling.
    await query(server, "UPDATE contact_phones SET phone = '1 415 555 0123' WHERE contact_id = $1", [targetId])
    await request(server, "POST", `/v1/contacts/${sourceId}/opt-out`, { token: company.token })

    const dry = await merge(company.token, sourceId, { target_contact_id: targetId, dry_run: true })
    assert.strictEqual(dry.status, 200, JSON.stringify(dry.body))
    assert.deepStrictEqual([dry.body.data.message, dry.body.data.dry_run], ["Dry run: nothing was moved.", true])
    assert.deepStrictEqual(dry.body.data.moved, { conversations: 1, threads: 1, messages: 1, contactAccounts: 1, tags: 1, phones: 1, emailes: 0 })
    // Nothing moved.
    assert.strictEqual(await contactOf(sourceMsg.conversation_id), sourceId)
    assert.strictEqual((await getContact(server, company.token, sourceId)).body.data.merged_into_contact_id, null)
    assert.strictEqual((await eventsOf(server, company.id, "contact.merged")).length, 0)

    const res = await merge(company.token, sourceId, { target_contact_id: targetId })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.deepStrictEqual(res.body.data.moved, dry.body.data.moved)
    // The source conversation is gone; its thread and message now belong to the target's.
    assert.strictEqual(await contactOf(sourceMsg.conversation_id), undefined)
    const threads = await query<{ conversation_id: number }>(server, "SELECT DISTINCT conversation_id FROM threads WHERE company_id = $1", [company.id])
    assert.deepStrictEqual(threads.map((t) => t.conversation_id), [targetMsg.conversation_id])
    const messages = await query<{ conversation_id: number }>(server, "SELECT conversation_id FROM messages WHERE company_id = $1", [company.id])
    assert.ok(messages.length === 2 && messages.every((m) => m.conversation_id === targetMsg.conversation_id))
    const merged = res.body.data.contact
    assert.deepStrictEqual(merged.tags.map((t: any) => t.name), ["a", "b"])
    assert.deepStrictEqual(merged.phones.map((p: any) => p.phone), ["1 415 555 0123", "+14155550999"])
    assert.deepStrictEqual(merged.emailes.map((e: any) => e.email), ["same@example.test"])
    assert.deepStrictEqual(merged.contactAccounts.map((a: any) => a.external_id).sort(), ["15550001", "src"])
    assert.notStrictEqual(merged.opted_out_at, null)
  })

  it("refuses itself, an unknown or foreign target, and a foreign source", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const a = await createContact(server, company.token, { firstName: "A" })
    const foreign = await createContact(server, other.token, { firstName: "F" })

    const self = await merge(company.token, a.id, { target_contact_id: a.id })
    assert.deepStrictEqual([self.status, self.body.errors], [422, { target_contact_id: ["The target contact must be another contact."] }])
    for (const target of [foreign.id, 999_999_999]) {
      const res = await merge(company.token, a.id, { target_contact_id: target })
      assert.deepStrictEqual([res.status, res.body.errors], [422, { target_contact_id: ["The selected target contact id is invalid."] }])
    }
    const stolen = await merge(other.token, a.id, { target_contact_id: foreign.id })
    assert.deepStrictEqual([stolen.status, stolen.body], [404, { message: "Contact not found." }])
    assert.strictEqual((await merge(company.token, a.id, {})).status, 422)
    assert.strictEqual((await getContact(server, company.token, a.id)).body.data.merged_into_contact_id, null)
  })
})

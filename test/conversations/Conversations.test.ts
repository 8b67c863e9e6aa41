import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { conversationOn, createChannel, externalIdOf, inbound, send } from "../messages/support.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { agentIn as agentInTeam } from "./support.ts"

let server: RunningServer
// Building a server (migrations on PGlite) is slow on a loaded machine.
beforeAll(async () => {
  server = await startServer()
}, 300_000)
afterAll(() => server?.close())

const agentIn = async (companyId: number, channelIds: ReadonlyArray<number>) => (await agentInTeam(server, companyId, channelIds)).token

describe("GET /v1/conversations", () => {
  it("lists the company's conversations by latest activity, paged", async () => {
    const a = await createCompany(server)
    const one = await conversationOn(server, a.token)
    const two = await conversationOn(server, a.token)
    const three = await conversationOn(server, a.token)
    // Activity moves a conversation to the top.
    await send(server, a.token, { channel_id: one.channelId, thread_id: one.threadId, text: "bump" })
    const res = await request(server, "GET", "/v1/conversations", { token: a.token })
    assert.strictEqual(res.status, 200)
    assert.deepStrictEqual(res.body.data.items.map((c: any) => c.id), [one.conversationId, three.conversationId, two.conversationId])
    assert.deepStrictEqual(res.body.data.pagination, { page: 1, perPage: 20, total: 3, lastPage: 1 })
    const first = res.body.data.items[0]
    assert.strictEqual(first.contact.displayName, "Ann Lee")
    assert.strictEqual(first.contact.status, "lead")
    assert.isString(first.last_message_at)
    const page2 = await request(server, "GET", "/v1/conversations?perPage=2&page=2", { token: a.token })
    assert.deepStrictEqual(page2.body.data.items.map((c: any) => c.id), [two.conversationId])
    assert.deepStrictEqual(page2.body.data.pagination, { page: 2, perPage: 2, total: 3, lastPage: 2 })
    const bad = await request(server, "GET", "/v1/conversations?perPage=500", { token: a.token })
    assert.strictEqual(bad.status, 422)
  })

  it("shows an agent only conversations with a thread on a channel of their teams", async () => {
    const a = await createCompany(server)
    const visible = await conversationOn(server, a.token)
    const hidden = await conversationOn(server, a.token)
    const token = await agentIn(a.id, [visible.channelId])
    const res = await request(server, "GET", "/v1/conversations", { token })
    assert.deepStrictEqual(res.body.data.items.map((c: any) => c.id), [visible.conversationId])
    assert.strictEqual(res.body.data.pagination.total, 1)
    const got = await request(server, "GET", `/v1/conversations/${hidden.conversationId}`, { token })
    assert.strictEqual(got.status, 404)
    const none = await agentIn(a.id, [])
    assert.deepStrictEqual((await request(server, "GET", "/v1/conversations", { token: none })).body.data.items, [])
  })

  it("never lists another company's conversations", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    await conversationOn(server, b.token)
    const res = await request(server, "GET", "/v1/conversations", { token: a.token })
    assert.deepStrictEqual(res.body.data.items, [])
    assert.strictEqual(res.body.data.pagination.total, 0)
  })
})

describe("GET /v1/conversations/{id}", () => {
  it("returns the conversation with its contact and the threads the caller may see", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const external_id = await externalIdOf(server, c.threadId)
    const second = await createChannel(server, a.token, "msgr_b")
    await inbound(server, a.token, second, { from: { external_id } })
    const res = await request(server, "GET", `/v1/conversations/${c.conversationId}`, { token: a.token })
    assert.strictEqual(res.status, 200)
    const data = res.body.data
    assert.strictEqual(data.id, c.conversationId)
    assert.strictEqual(data.contact.id, data.contact_id)
    assert.strictEqual(data.threads.length, 2)
    assert.deepStrictEqual(data.threads.map((t: any) => t.channel_id).sort(), [c.channelId, second].sort())
    assert.strictEqual(data.threads[0].channel_type, "msgr_b")
    assert.strictEqual(data.threads[0].is_group, false)
    assert.isString(data.threads[0].last_inbound_at)

    const token = await agentIn(a.id, [second])
    const limited = await request(server, "GET", `/v1/conversations/${c.conversationId}`, { token })
    assert.deepStrictEqual(limited.body.data.threads.map((t: any) => t.channel_id), [second])
  })

  it("answers 404 for another company's conversation and a missing one", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const theirs = await conversationOn(server, b.token)
    const foreign = await request(server, "GET", `/v1/conversations/${theirs.conversationId}`, { token: a.token })
    assert.strictEqual(foreign.status, 404)
    assert.deepStrictEqual(foreign.body, { message: "Conversation not found." })
    const missing = await request(server, "GET", "/v1/conversations/999999999", { token: a.token })
    assert.strictEqual(missing.status, 404)
    const unauthenticated = await request(server, "GET", `/v1/conversations/${theirs.conversationId}`)
    assert.strictEqual(unauthenticated.status, 401)
  })
})

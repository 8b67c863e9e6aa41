import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { unique } from "../support/Ids.ts"
import { eventsOf, query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { conversationOn, createChannel, inbound, messageCount, send, threadOf } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

describe("POST /v1/messages/send", () => {
  it("sends to a thread: 201 with the message, status sent, provider id, and the events", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const res = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "Hi there" })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    const m = res.body.data
    assert.strictEqual(m.direction, "outbound")
    assert.strictEqual(m.message_type, "text")
    assert.strictEqual(m.message_content, "Hi there")
    assert.strictEqual(m.status, "sent")
    assert.strictEqual(m.thread_id, c.threadId)
    assert.strictEqual(m.conversation_id, c.conversationId)
    assert.strictEqual(m.channel_id, c.channelId)
    assert.match(m.external_message_id, /^sbx_/)
    assert.isString(m.can_edit_until)
    assert.isString(m.can_revoke_until)
    assert.deepStrictEqual(m.attachments, [])
    const me = await request(server, "GET", "/v1/me", { token: a.token })
    assert.strictEqual(m.sender_user_id, me.body.data.id)

    const created = (await eventsOf(server, a.id, "message.created")).map((e) => e.payload).filter((p) => p.message.id === m.id)
    assert.strictEqual(created.length, 1)
    assert.strictEqual(created[0].type, "text")
    assert.strictEqual(created[0].message.type, "text")
    // One event per send, once the provider has answered.
    assert.strictEqual(created[0].message.status, "sent")
    assert.strictEqual(created[0].message.external_message_id, m.external_message_id)
    assert.strictEqual(created[0].referral, null)
    const updated = (await eventsOf(server, a.id, "message.updated")).map((e) => e.payload).filter((p) => p.message.id === m.id)
    assert.strictEqual(updated.length, 0)
    const statuses = await request(server, "GET", `/v1/messages/${m.id}/statuses`, { token: a.token })
    assert.deepStrictEqual(statuses.body.data.map((s: any) => s.status), ["sent"])
  })

  it("sends to a contact_id, creating the thread on a channel the contact has an account for", async () => {
    const a = await createCompany(server)
    const first = await conversationOn(server, a.token, "msgr_b")
    const second = await createChannel(server, a.token, "msgr_b")
    const [{ contact_id }] = await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [
      first.conversationId
    ])
    const res = await send(server, a.token, { channel_id: second, contact_id, text: "via the other bot" })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.conversation_id, first.conversationId)
    assert.notStrictEqual(res.body.data.thread_id, first.threadId)
    assert.strictEqual(res.body.data.channel_id, second)

    const noAccount = await createChannel(server, a.token, "msgr_c_business")
    const refused = await send(server, a.token, { channel_id: noAccount, contact_id, text: "x" })
    assert.strictEqual(refused.status, 422)
    assert.deepStrictEqual(Object.keys(refused.body.errors), ["contact_id"])
    const missing = await send(server, a.token, { channel_id: second, contact_id: 999999999, text: "x" })
    assert.strictEqual(missing.status, 404)
    assert.strictEqual(missing.body.message, "Contact not found.")
  })

  it("sends to `to`: external_id creates contact, conversation and thread; phone on msgr_a; username of a known account", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_b")
    const external = unique("tg")
    const byId = await send(server, a.token, { channel_id: channel, to: { external_id: external }, text: "first contact" })
    assert.strictEqual(byId.status, 201, JSON.stringify(byId.body))
    const again = await send(server, a.token, { channel_id: channel, to: { external_id: external }, text: "second" })
    assert.strictEqual(again.body.data.thread_id, byId.body.data.thread_id)
    const created = await eventsOf(server, a.id, "conversation.created")
    assert.strictEqual(created.filter((e) => e.payload.conversation_id === byId.body.data.conversation_id).length, 1)

    const qr = await createChannel(server, a.token, "msgr_a")
    const byPhone = await send(server, a.token, { channel_id: qr, to: { phone: "+1 (202) 555-7788" }, text: "by phone" })
    assert.strictEqual(byPhone.status, 201, JSON.stringify(byPhone.body))
    const [account] = await query<{ external_id: string }>(
      server,
      "SELECT ca.external_id FROM threads t JOIN contact_accounts ca ON ca.id = t.contact_account_id WHERE t.id = $1",
      [byPhone.body.data.thread_id]
    )
    assert.strictEqual(account.external_id, "12025557788")

    const username = unique("ann").replace(/-/g, "_")
    await inbound(server, a.token, channel, { from: { external_id: unique("tg"), username } })
    const byName = await send(server, a.token, { channel_id: channel, to: { username: `@${username.toUpperCase()}` }, text: "by name" })
    assert.strictEqual(byName.status, 201, JSON.stringify(byName.body))
    const unknown = await send(server, a.token, { channel_id: channel, to: { username: "nobody_known_here" }, text: "x" })
    assert.strictEqual(unknown.status, 422)
    assert.deepStrictEqual(Object.keys(unknown.body.errors), ["to.username"])
    const phoneOnTelegram = await send(server, a.token, { channel_id: channel, to: { phone: "+12025550000" }, text: "x" })
    assert.strictEqual(phoneOnTelegram.status, 422)
    assert.deepStrictEqual(Object.keys(phoneOnTelegram.body.errors), ["to.phone"])
  })

  it("validates the body: one recipient, some content, attachment rows; bad sources are attachment_source_invalid", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const before = await messageCount(server, a.id)
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ channel_id: c.channelId, text: "no target" }, "thread_id"],
      [{ channel_id: c.channelId, thread_id: c.threadId, contact_id: 1, text: "two targets" }, "thread_id"],
      [{ channel_id: c.channelId, to: {}, text: "empty to" }, "to"],
      [{ channel_id: c.channelId, thread_id: c.threadId }, "text"],
      [{ channel_id: c.channelId, thread_id: c.threadId, text: "   " }, "text"],
      [{ channel_id: c.channelId, thread_id: c.threadId, attachments: [{ media_id: 1, sticker_id: 2 }] }, "attachments.0"],
      [{ channel_id: c.channelId, thread_id: c.threadId, text: "x", attachments: [{}] }, "attachments.0"],
      [{ channel_id: c.channelId, thread_id: c.threadId, text: "x".repeat(4097) }, "text"],
      [{ thread_id: c.threadId, text: "no channel" }, "channel_id"]
    ]
    for (const [body, field] of cases) {
      const res = await send(server, a.token, body)
      assert.strictEqual(res.status, 422, JSON.stringify(body))
      assert.ok(res.body.errors?.[field], `${JSON.stringify(body)} → ${JSON.stringify(res.body)}`)
    }
    for (const body of [
      { channel_id: c.channelId, thread_id: c.threadId, attachments: [{ media_id: 12345 }] },
      { channel_id: c.channelId, thread_id: c.threadId, attachments: [{ sticker_id: 7 }] },
      { channel_id: c.channelId, thread_id: c.threadId, sticker_id: 7 }
    ]) {
      const res = await send(server, a.token, body)
      assert.strictEqual(res.status, 422)
      assert.strictEqual(res.body.error_code, "attachment_source_invalid")
    }
    assert.strictEqual(await messageCount(server, a.id), before)
  })

  it("answers 404 for another company's channel and thread, and 422 for a thread of another channel", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const ca = await conversationOn(server, a.token)
    const cb = await conversationOn(server, b.token)
    const foreignChannel = await send(server, a.token, { channel_id: cb.channelId, thread_id: cb.threadId, text: "x" })
    assert.strictEqual(foreignChannel.status, 404)
    assert.strictEqual(foreignChannel.body.message, "Channel not found.")
    const foreignThread = await send(server, a.token, { channel_id: ca.channelId, thread_id: cb.threadId, text: "x" })
    assert.strictEqual(foreignThread.status, 404)
    assert.strictEqual(foreignThread.body.message, "Thread not found.")
    const other = await createChannel(server, a.token, "msgr_b")
    const wrongChannel = await send(server, a.token, { channel_id: other, thread_id: ca.threadId, text: "x" })
    assert.strictEqual(wrongChannel.status, 422)
    assert.deepStrictEqual(Object.keys(wrongChannel.body.errors), ["thread_id"])
    assert.strictEqual(await messageCount(server, b.id), 1)
  })

  it("refuses a blocked contact with the spec's body and sends nothing", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    await query(server, "UPDATE contacts SET blocked_at = now() WHERE id = (SELECT contact_id FROM conversations WHERE id = $1)", [
      c.conversationId
    ])
    const before = await messageCount(server, a.id)
    const res = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "x" })
    assert.strictEqual(res.status, 422)
    assert.deepStrictEqual(res.body, { message: "This contact is blocked; the message was not sent.", error_code: "contact_blocked" })
    const direct = await request(server, "POST", "/v1/messages", { token: a.token, body: { thread_id: c.threadId, text: "x" } })
    assert.strictEqual(direct.status, 422)
    assert.strictEqual(direct.body.error_code, "contact_blocked")
    assert.strictEqual(await messageCount(server, a.id), before)
  })

  it("msgr_a_business needs an inbound message within 24 hours, else template_required", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token, "msgr_a_business")
    const open = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "inside the window" })
    assert.strictEqual(open.status, 201, JSON.stringify(open.body))
    assert.strictEqual(open.body.data.status, "sent")
    assert.strictEqual(open.body.data.can_revoke_until, null)

    await query(server, "UPDATE threads SET last_inbound_at = now() - interval '25 hours' WHERE id = $1", [c.threadId])
    const closed = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "too late" })
    assert.strictEqual(closed.status, 422)
    assert.strictEqual(closed.body.error_code, "template_required")
    assert.match(closed.body.message, /template/)

    const fresh = await send(server, a.token, { channel_id: c.channelId, to: { phone: "+4915112345678" }, text: "cold" })
    assert.strictEqual(fresh.status, 422)
    assert.strictEqual(fresh.body.error_code, "template_required")

    // Any other channel type without a window sends regardless of age.
    const b = await conversationOn(server, a.token, "msgr_b")
    await query(server, "UPDATE threads SET last_inbound_at = now() - interval '30 days' WHERE id = $1", [b.threadId])
    assert.strictEqual((await send(server, a.token, { channel_id: b.channelId, thread_id: b.threadId, text: "ok" })).status, 201)
  })

  it("a disconnected channel is 422 channel_not_connected; a provider failure keeps the message as failed", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    await request(server, "PATCH", `/v1/channels/${c.channelId}`, { token: a.token, body: { status: "disconnected" } })
    const off = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "x" })
    assert.strictEqual(off.status, 422)
    assert.strictEqual(off.body.error_code, "channel_not_connected")

    await request(server, "PATCH", `/v1/channels/${c.channelId}`, {
      token: a.token,
      body: { status: "connected", settings: { sandbox_fail: true } }
    })
    const failed = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "will fail" })
    assert.strictEqual(failed.status, 201, JSON.stringify(failed.body))
    assert.strictEqual(failed.body.data.status, "failed")
    assert.strictEqual(failed.body.data.external_message_id, null)
    const history = await request(server, "GET", `/v1/messages/${failed.body.data.id}/statuses`, { token: a.token })
    assert.strictEqual(history.body.data.length, 1)
    assert.strictEqual(history.body.data[0].status, "failed")
    assert.match(history.body.data[0].error, /channel_offline/)
  })

  it("an agent sends only on channels of their teams; others are 404", async () => {
    const a = await createCompany(server)
    const seen = await conversationOn(server, a.token)
    const hidden = await conversationOn(server, a.token)
    const agent = await addUser(server, a.id, { role: "agent" })
    const token = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
    const [team] = await query<{ id: number }>(server, "INSERT INTO teams (company_id, name) VALUES ($1, 'Support') RETURNING id", [a.id])
    await query(server, "INSERT INTO team_members (company_id, team_id, user_id) VALUES ($1, $2, $3)", [a.id, team.id, agent.id])
    await query(server, "INSERT INTO team_channels (company_id, team_id, channel_id) VALUES ($1, $2, $3)", [a.id, team.id, seen.channelId])
    const ok = await send(server, token, { channel_id: seen.channelId, thread_id: seen.threadId, text: "mine" })
    assert.strictEqual(ok.status, 201, JSON.stringify(ok.body))
    const no = await send(server, token, { channel_id: hidden.channelId, thread_id: hidden.threadId, text: "not mine" })
    assert.strictEqual(no.status, 404)
    const direct = await request(server, "POST", "/v1/messages", { token, body: { thread_id: hidden.threadId, text: "x" } })
    assert.strictEqual(direct.status, 404)
  })
})

describe("POST /v1/messages (direct create)", () => {
  it("creates and sends on a thread, with quoted replies by id or external id", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const res = await request(server, "POST", "/v1/messages", {
      token: a.token,
      body: { thread_id: c.threadId, text: "reply", quoted_message_id: c.inboundId }
    })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.quoted_message_id, c.inboundId)
    assert.strictEqual(res.body.data.status, "sent")

    const [{ external_message_id }] = await query<{ external_message_id: string }>(
      server,
      "SELECT external_message_id FROM messages WHERE id = $1",
      [c.inboundId]
    )
    const byExternal = await request(server, "POST", "/v1/messages", {
      token: a.token,
      body: { thread_id: c.threadId, text: "reply 2", quoted_external_message_id: external_message_id }
    })
    assert.strictEqual(byExternal.status, 201)
    assert.strictEqual(byExternal.body.data.quoted_message_id, c.inboundId)

    const both = await request(server, "POST", "/v1/messages", {
      token: a.token,
      body: { thread_id: c.threadId, text: "x", quoted_message_id: c.inboundId, quoted_external_message_id: "abc" }
    })
    assert.strictEqual(both.status, 422)
    const elsewhere = await conversationOn(server, a.token)
    const foreignQuote = await request(server, "POST", "/v1/messages", {
      token: a.token,
      body: { thread_id: c.threadId, text: "x", quoted_message_id: elsewhere.inboundId }
    })
    assert.strictEqual(foreignQuote.status, 422)
    assert.deepStrictEqual(Object.keys(foreignQuote.body.errors), ["quoted_message_id"])
    const noThread = await request(server, "POST", "/v1/messages", { token: a.token, body: { text: "x" } })
    assert.strictEqual(noThread.status, 422)
    assert.ok(noThread.body.errors.thread_id)
  })

  it("answers 404 for another company's thread", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const cb = await conversationOn(server, b.token)
    const res = await request(server, "POST", "/v1/messages", { token: a.token, body: { thread_id: cb.threadId, text: "x" } })
    assert.strictEqual(res.status, 404)
    assert.strictEqual(res.body.message, "Thread not found.")
  })

  it("keeps ingestion and threads apart per channel account", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_b")
    const one = await inbound(server, a.token, channel, { from: { external_id: "same-user" } })
    const two = await inbound(server, a.token, channel, { from: { external_id: "same-user" } })
    assert.strictEqual(one.conversation_id, two.conversation_id)
    assert.strictEqual((await threadOf(server, one.message_id)).thread_id, (await threadOf(server, two.message_id)).thread_id)
  })
})

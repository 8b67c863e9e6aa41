import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { unique } from "../support/Ids.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { conversationOn, createChannel, inbound, messageCount, send, threadOf } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const forward = (token: string, id: number, body: Record<string, unknown>) =>
  request(server, "POST", `/v1/messages/${id}/forward`, { token, body })

const accountOf = async (threadId: number) =>
  (await query<{ id: number; contact_id: number }>(
    server,
    "SELECT ca.id, ca.contact_id FROM threads t JOIN contact_accounts ca ON ca.id = t.contact_account_id WHERE t.id = $1",
    [threadId]
  ))[0]

const refusal = async (res: { status: number; body: any }, code: string) => {
  assert.strictEqual(res.status, 422, JSON.stringify(res.body))
  assert.strictEqual(res.body.error_code, code, JSON.stringify(res.body))
  assert.isString(res.body.message)
}

describe("POST /v1/messages/{id}/forward", () => {
  it("copy-sends the message as a new outbound message on the target thread", async () => {
    const a = await createCompany(server)
    const source = await conversationOn(server, a.token)
    const target = await conversationOn(server, a.token, "msgr_a")
    const res = await forward(a.token, source.inboundId, { target_thread_id: target.threadId })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    const m = res.body.data
    assert.strictEqual(m.direction, "outbound")
    assert.strictEqual(m.message_content, "hello")
    assert.strictEqual(m.thread_id, target.threadId)
    assert.strictEqual(m.conversation_id, target.conversationId)
    assert.strictEqual(m.status, "sent")
    const [{ metadata }] = await query<any>(server, "SELECT metadata FROM messages WHERE id = $1", [m.id])
    assert.strictEqual(metadata.forwarded_from_message_id, source.inboundId)
  })

  it("reaches a contact account: its one thread, or a new thread on target_channel_id", async () => {
    const a = await createCompany(server)
    const source = await conversationOn(server, a.token)
    const target = await conversationOn(server, a.token, "msgr_b")
    const account = await accountOf(target.threadId)
    const viaThread = await forward(a.token, source.inboundId, { target_contact_account_id: account.id })
    assert.strictEqual(viaThread.status, 201, JSON.stringify(viaThread.body))
    assert.strictEqual(viaThread.body.data.thread_id, target.threadId)
    const second = await createChannel(server, a.token, "msgr_b")
    const onSecond = await forward(a.token, source.inboundId, { target_contact_account_id: account.id, target_channel_id: second })
    assert.strictEqual(onSecond.status, 201, JSON.stringify(onSecond.body))
    assert.strictEqual(onSecond.body.data.channel_id, second)
    assert.strictEqual(onSecond.body.data.conversation_id, target.conversationId)
    assert.notStrictEqual(onSecond.body.data.thread_id, target.threadId)
  })

  it("validates the target and answers 404 for targets of another company", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const source = await conversationOn(server, a.token)
    const theirs = await conversationOn(server, b.token)
    const neither = await forward(a.token, source.inboundId, {})
    assert.strictEqual(neither.status, 422)
    assert.ok(neither.body.errors.target_thread_id)
    const both = await forward(a.token, source.inboundId, { target_thread_id: source.threadId, target_contact_account_id: 1 })
    assert.strictEqual(both.status, 422)
    const foreignThread = await forward(a.token, source.inboundId, { target_thread_id: theirs.threadId })
    assert.strictEqual(foreignThread.status, 404)
    const foreignAccount = await forward(a.token, source.inboundId, { target_contact_account_id: (await accountOf(theirs.threadId)).id })
    assert.strictEqual(foreignAccount.status, 404)
    const foreignChannel = await forward(a.token, source.inboundId, {
      target_contact_account_id: (await accountOf(source.threadId)).id,
      target_channel_id: theirs.channelId
    })
    assert.strictEqual(foreignChannel.status, 404)
    const foreignSource = await forward(a.token, theirs.inboundId, { target_thread_id: source.threadId })
    assert.strictEqual(foreignSource.status, 404)
    assert.strictEqual(await messageCount(server, b.id), 1)
  })

  it("refuses with each of the ten codes", async () => {
    const a = await createCompany(server)
    const source = await conversationOn(server, a.token)
    const target = await conversationOn(server, a.token, "msgr_b")
    const before = await messageCount(server, a.id)

    // message_deleted
    const ours = await send(server, a.token, { channel_id: source.channelId, thread_id: source.threadId, text: "to delete" })
    await request(server, "DELETE", `/v1/messages/${ours.body.data.id}`, { token: a.token })
    await refusal(await forward(a.token, ours.body.data.id, { target_thread_id: target.threadId }), "message_deleted")

    // message_not_forwardable: a location (no structured payload kept), and a message with nothing to copy
    const where = await inbound(server, a.token, source.channelId, { text: "52.52,13.40" })
    await query(server, "UPDATE messages SET message_type = 'location' WHERE id = $1", [where.message_id])
    await refusal(await forward(a.token, where.message_id, { target_thread_id: target.threadId }), "message_not_forwardable")
    const blank = await inbound(server, a.token, source.channelId, { text: null })
    await refusal(await forward(a.token, blank.message_id, { target_thread_id: target.threadId }), "message_not_forwardable")

    // channel_incompatible: the thread is on another channel than target_channel_id / account of another type
    const qr = await createChannel(server, a.token, "msgr_a")
    await refusal(
      await forward(a.token, source.inboundId, { target_thread_id: target.threadId, target_channel_id: qr }),
      "channel_incompatible"
    )
    await refusal(
      await forward(a.token, source.inboundId, { target_contact_account_id: (await accountOf(target.threadId)).id, target_channel_id: qr }),
      "channel_incompatible"
    )

    // no_compatible_channel: the account's only channel type has no live channel left
    const social = await conversationOn(server, a.token, "msgr_c_business")
    const socialAccount = await accountOf(social.threadId)
    assert.strictEqual((await request(server, "DELETE", `/v1/channels/${social.channelId}`, { token: a.token })).status, 200)
    await refusal(await forward(a.token, source.inboundId, { target_contact_account_id: socialAccount.id }), "no_compatible_channel")

    // channel_required: the account has threads on two channels of its type
    const twoWay = await conversationOn(server, a.token, "msgr_b")
    const other = await createChannel(server, a.token, "msgr_b")
    const twoWayAccount = await accountOf(twoWay.threadId)
    const reach = await send(server, a.token, { channel_id: other, contact_id: twoWayAccount.contact_id, text: "hi" })
    assert.strictEqual(reach.status, 201, JSON.stringify(reach.body))
    await refusal(await forward(a.token, source.inboundId, { target_contact_account_id: twoWayAccount.id }), "channel_required")

    // channel_not_connected
    const offline = await conversationOn(server, a.token, "msgr_b")
    await request(server, "PATCH", `/v1/channels/${offline.channelId}`, { token: a.token, body: { status: "disconnected" } })
    await refusal(await forward(a.token, source.inboundId, { target_thread_id: offline.threadId }), "channel_not_connected")

    // channel_not_textable: a comment thread takes replies, not forwards
    const page = await createChannel(server, a.token, "msgr_c_business")
    const comment = await inbound(server, a.token, page, { thread: { external_id: unique("post"), is_group: true } })
    const commentThread = (await threadOf(server, comment.message_id)).thread_id
    await refusal(await forward(a.token, source.inboundId, { target_thread_id: commentThread }), "channel_not_textable")

    // content_type_unsupported: a voice note cannot go to the social inbox
    const voice = await inbound(server, a.token, source.channelId, { text: "(voice)" })
    await query(server, "UPDATE messages SET message_type = 'voice' WHERE id = $1", [voice.message_id])
    const dm = await inbound(server, a.token, page, { text: "a DM" })
    const dmThread = (await threadOf(server, dm.message_id)).thread_id
    await refusal(await forward(a.token, voice.message_id, { target_thread_id: dmThread }), "content_type_unsupported")

    // contact_blocked, with the spec's message
    const blocked = await conversationOn(server, a.token, "msgr_b")
    await query(server, "UPDATE contacts SET blocked_at = now() WHERE id = $1", [(await accountOf(blocked.threadId)).contact_id])
    const refused = await forward(a.token, source.inboundId, { target_thread_id: blocked.threadId })
    assert.deepStrictEqual(refused.body, { message: "This contact is blocked; the message was not sent.", error_code: "contact_blocked" })

    // wa_window_closed
    const business = await conversationOn(server, a.token, "msgr_a_business")
    await query(server, "UPDATE threads SET last_inbound_at = now() - interval '25 hours' WHERE id = $1", [business.threadId])
    await refusal(await forward(a.token, source.inboundId, { target_thread_id: business.threadId }), "wa_window_closed")

    const created = await messageCount(server, a.id)
    // Only the seeding messages exist: the refusals sent nothing (ours, where, blank, voice, dm, reach and the conversations' inbounds).
    const [{ n }] = await query<{ n: number }>(
      server,
      "SELECT count(*)::int AS n FROM messages WHERE company_id = $1 AND metadata ? 'forwarded_from_message_id'",
      [a.id]
    )
    assert.strictEqual(n, 0)
    assert.ok(created > before)
  })
})

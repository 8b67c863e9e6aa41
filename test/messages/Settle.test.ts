import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { WhatsAppFake } from "../fakes/WhatsAppFake.ts"
import { unique } from "../support/Ids.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { conversationOn, send } from "./support.ts"

// Settling keys of unknown outcome: a send cut off during the provider call is simulated by putting its
// message and key back to what such a crash leaves (message `pending` without provider id, key pending and
// older than deadline plus lease); a retry then marks the key `outcome_unknown`, as after a real `kill -9`
// (test/cluster/Failover.test.ts).

const wa = new WhatsAppFake()
let server: RunningServer
beforeAll(async () => {
  await wa.http.start()
  server = await startServer({ whatsappApiBase: wa.http.url })
})
afterAll(async () => {
  await server?.close()
  await wa.http.close()
})

const cutOff = async (messageId: number, key: string) => {
  await query(
    server,
    "UPDATE messages SET status = 'pending', external_message_id = NULL, created_at = now() - interval '10 minutes' WHERE id = $1",
    [messageId]
  )
  await query(server, "DELETE FROM message_statuses WHERE message_id = $1", [messageId])
  await query(
    server,
    "UPDATE idempotency_keys SET state = 'pending', response_status = NULL, response_body = $2::jsonb, created_at = now() - interval '10 minutes' WHERE key = $1",
    [key, JSON.stringify({ message_id: messageId })]
  )
}

const unknownOutcome = async (token: string, body: Record<string, unknown>, key: string) => {
  const res = await send(server, token, body, { "idempotency-key": key })
  assert.deepStrictEqual([res.status, res.body.reason], [409, "outcome_unknown"], JSON.stringify(res.body))
}

const settle = (token: string, key: string, body: Record<string, unknown>) =>
  request(server, "POST", `/v1/messages/idempotency-keys/${encodeURIComponent(key)}/settle`, { token, body })

const whatsappSetup = async () => {
  const company = await createCompany(server)
  const creds = {
    access_token: unique("EAAsettle"),
    phone_number_id: String(5_550_000_000 + Math.floor(Math.random() * 1e9)),
    app_secret: unique("secret"),
    verify_token: "v"
  }
  wa.tokens.add(creds.access_token)
  const channel = await request(server, "POST", "/v1/channels", {
    token: company.token,
    body: { type: "msgr_a_business", provider: "whatsapp_cloud", name: "WA", credentials: creds }
  })
  assert.strictEqual(channel.status, 201, JSON.stringify(channel.body))
  const channelId = channel.body.data.id as number
  const customer = `1555${Math.floor(Math.random() * 1e7)}`
  const hook = (value: Record<string, unknown>, secret = creds.app_secret, phoneNumberId = creds.phone_number_id) => {
    const signed = WhatsAppFake.signed(secret, WhatsAppFake.notification(phoneNumberId, value))
    return request(server, "POST", `/hooks/whatsapp/${channelId}`, { raw: signed.body, headers: { "x-hub-signature-256": signed.signature } })
  }
  const hi = await hook({
    contacts: [{ profile: { name: "Maria" }, wa_id: customer }],
    messages: [{ from: customer, id: unique("wamid.IN"), timestamp: String(Math.floor(Date.now() / 1000)), type: "text", text: { body: "Hi" } }]
  })
  assert.strictEqual(hi.status, 200, JSON.stringify(hi.body))
  const [{ thread_id }] = await query<{ thread_id: number }>(server, "SELECT thread_id FROM messages WHERE channel_id = $1", [channelId])
  return { company, channelId, threadId: thread_id, customer, hook }
}

describe("a provider status webhook settles a key of unknown outcome", () => {
  it("finds the cut-off message by the reference WhatsApp echoes; the key then answers the stored message", async () => {
    const a = await whatsappSetup()
    const key = unique("key")
    const body = { channel_id: a.channelId, thread_id: a.threadId, text: "did it go?" }
    const first = await send(server, a.company.token, body, { "idempotency-key": key })
    assert.strictEqual(first.status, 201, JSON.stringify(first.body))
    const messageId = first.body.data.id as number
    const call = wa.http.calls("POST messages").find((c) => c.body.biz_opaque_callback_data === `crm_message:${messageId}`)
    assert.ok(call, "the send carries its reference to the provider")
    const wamid = first.body.data.external_message_id as string

    await cutOff(messageId, key)
    await unknownOutcome(a.company.token, body, key)

    // Another company's webhook carrying A's reference (its own channel, signed with its own secret) settles nothing.
    const b = await whatsappSetup()
    const foreign = await b.hook({ statuses: [{ id: "wamid.B1", status: "delivered", timestamp: "1700000100", recipient_id: b.customer, biz_opaque_callback_data: `crm_message:${messageId}` }] })
    assert.strictEqual(foreign.status, 200)
    await unknownOutcome(a.company.token, body, key)
    // A status without the reference, for an id we never recorded, neither.
    assert.strictEqual((await a.hook({ statuses: [{ id: wamid, status: "delivered", timestamp: "1700000100", recipient_id: a.customer }] })).status, 200)
    await unknownOutcome(a.company.token, body, key)

    const delivered = await a.hook({
      statuses: [{ id: wamid, status: "delivered", timestamp: "1700000100", recipient_id: a.customer, biz_opaque_callback_data: `crm_message:${messageId}` }]
    })
    assert.strictEqual(delivered.status, 200)
    const settled = await send(server, a.company.token, body, { "idempotency-key": key })
    assert.strictEqual(settled.status, 201, JSON.stringify(settled.body))
    assert.strictEqual(settled.body.data.id, messageId)
    assert.strictEqual(settled.body.data.status, "delivered")
    assert.strictEqual(settled.body.data.external_message_id, wamid)
    const [row] = await query<{ status: string; external_message_id: string }>(server, "SELECT status, external_message_id FROM messages WHERE id = $1", [messageId])
    assert.deepStrictEqual(row, { status: "delivered", external_message_id: wamid })
    // Later statuses find it by its provider id as usual.
    await a.hook({ statuses: [{ id: wamid, status: "read", timestamp: "1700000200", recipient_id: a.customer }] })
    const [read] = await query<{ status: string }>(server, "SELECT status FROM messages WHERE id = $1", [messageId])
    assert.strictEqual(read.status, "read")
    assert.strictEqual(wa.http.calls("POST messages").filter((c) => (c.body as { text?: { body?: string } }).text?.body === "did it go?").length, 1)
  })

  it("leaves a send still in progress to its own request", async () => {
    const a = await whatsappSetup()
    const key = unique("key")
    const body = { channel_id: a.channelId, thread_id: a.threadId, text: "live" }
    const first = await send(server, a.company.token, body, { "idempotency-key": key })
    const messageId = first.body.data.id as number
    // Cut off a moment ago: its request could still be running.
    await query(server, "UPDATE messages SET status = 'pending', external_message_id = NULL WHERE id = $1", [messageId])
    await query(server, "UPDATE idempotency_keys SET state = 'pending', response_body = $2::jsonb WHERE key = $1", [key, JSON.stringify({ message_id: messageId })])
    await a.hook({ statuses: [{ id: "wamid.X", status: "sent", timestamp: "1700000100", recipient_id: a.customer, biz_opaque_callback_data: `crm_message:${messageId}` }] })
    const [row] = await query<{ status: string }>(server, "SELECT status FROM messages WHERE id = $1", [messageId])
    assert.strictEqual(row.status, "pending")
    assert.strictEqual((await send(server, a.company.token, body, { "idempotency-key": key })).status, 409)
  })
})

describe("POST /v1/messages/idempotency-keys/{key}/settle", () => {
  it("an admin settles a key as sent or not sent; retries then answer that message", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const sentKey = unique("key")
    const lostKey = unique("key")
    const body = (text: string) => ({ channel_id: c.channelId, thread_id: c.threadId, text })
    const one = await send(server, a.token, body("one"), { "idempotency-key": sentKey })
    const two = await send(server, a.token, body("two"), { "idempotency-key": lostKey })
    await cutOff(one.body.data.id, sentKey)
    await cutOff(two.body.data.id, lostKey)
    await unknownOutcome(a.token, body("one"), sentKey)

    const sent = await settle(a.token, sentKey, { outcome: "sent", external_message_id: "console-42" })
    assert.strictEqual(sent.status, 200, JSON.stringify(sent.body))
    assert.deepStrictEqual([sent.body.data.id, sent.body.data.status, sent.body.data.external_message_id], [one.body.data.id, "sent", "console-42"])
    const replay = await send(server, a.token, body("one"), { "idempotency-key": sentKey })
    assert.strictEqual(replay.status, 201)
    assert.deepStrictEqual(replay.body.data, sent.body.data)

    // Abandoned but not yet marked by a retry or the sweep: settled all the same.
    const lost = await settle(a.token, lostKey, { outcome: "not_sent" })
    assert.strictEqual(lost.status, 200, JSON.stringify(lost.body))
    assert.strictEqual(lost.body.data.status, "failed")
    const failed = await send(server, a.token, body("two"), { "idempotency-key": lostKey })
    assert.deepStrictEqual([failed.status, failed.body.data.id, failed.body.data.status], [201, two.body.data.id, "failed"])
    const history = await request(server, "GET", `/v1/messages/${two.body.data.id}/statuses`, { token: a.token })
    assert.deepStrictEqual(history.body.data.map((s: { status: string }) => s.status), ["failed"])

    const again = await settle(a.token, sentKey, { outcome: "not_sent" })
    assert.deepStrictEqual([again.status, again.body.error_code], [422, "key_settled"])
    const [row] = await query<{ status: string }>(server, "SELECT status FROM messages WHERE id = $1", [one.body.data.id])
    assert.strictEqual(row.status, "sent")
  })

  it("refuses a live key, an unknown one, bad input and callers who are not admins", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const key = unique("key")
    const body = { channel_id: c.channelId, thread_id: c.threadId, text: "live" }
    const first = await send(server, a.token, body, { "idempotency-key": key })
    await query(server, "UPDATE idempotency_keys SET state = 'pending', response_body = $2::jsonb WHERE key = $1", [key, JSON.stringify({ message_id: first.body.data.id })])
    assert.strictEqual((await settle(a.token, key, { outcome: "sent" })).status, 409)
    assert.strictEqual((await settle(a.token, unique("nokey"), { outcome: "sent" })).status, 404)
    const bad = await settle(a.token, key, { outcome: "maybe" })
    assert.strictEqual(bad.status, 422)
    assert.ok(bad.body.errors.outcome)
    const agent = await addUser(server, a.id, { role: "agent" })
    const agentToken = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
    assert.strictEqual((await settle(agentToken, key, { outcome: "sent" })).status, 403)
  })

  it("asks for message_id when two users' keys share the value", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const other = await addUser(server, a.id, { role: "admin" })
    const otherToken = (await mobileLogin(server, other.email, other.password)).body.data.token as string
    const key = unique("key")
    const body = { channel_id: c.channelId, thread_id: c.threadId, text: "shared" }
    const mine = await send(server, a.token, body, { "idempotency-key": key })
    const theirs = await send(server, otherToken, body, { "idempotency-key": key })
    for (const m of [mine, theirs]) {
      await query(server, "UPDATE messages SET status = 'pending', external_message_id = NULL, created_at = now() - interval '10 minutes' WHERE id = $1", [m.body.data.id])
    }
    await query(server, "UPDATE idempotency_keys SET state = 'pending', response_body = jsonb_build_object('message_id', m.id), created_at = now() - interval '10 minutes' FROM messages m WHERE idempotency_keys.key = $1 AND m.id IN ($2, $3) AND m.sender_user_id = idempotency_keys.user_id", [key, mine.body.data.id, theirs.body.data.id])
    const ambiguous = await settle(a.token, key, { outcome: "sent" })
    assert.strictEqual(ambiguous.status, 422)
    assert.ok(ambiguous.body.errors.message_id)
    const picked = await settle(a.token, key, { outcome: "sent", message_id: theirs.body.data.id })
    assert.deepStrictEqual([picked.status, picked.body.data.id], [200, theirs.body.data.id])
    await unknownOutcome(a.token, body, key)
    const replay = await send(server, otherToken, body, { "idempotency-key": key })
    assert.deepStrictEqual([replay.status, replay.body.data.id], [201, theirs.body.data.id])
  })

  it("keeps companies apart: another company's admin gets 404 and the key stays unknown", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const key = unique("key")
    const body = { channel_id: c.channelId, thread_id: c.threadId, text: "mine" }
    const first = await send(server, a.token, body, { "idempotency-key": key })
    await cutOff(first.body.data.id, key)
    await unknownOutcome(a.token, body, key)
    const foreign = await settle(b.token, key, { outcome: "sent" })
    assert.strictEqual(foreign.status, 404, JSON.stringify(foreign.body))
    assert.strictEqual((await settle(b.token, key, { outcome: "sent", message_id: first.body.data.id })).status, 404)
    await unknownOutcome(a.token, body, key)
    const [row] = await query<{ status: string }>(server, "SELECT status FROM messages WHERE id = $1", [first.body.data.id])
    assert.strictEqual(row.status, "pending")
  })
})

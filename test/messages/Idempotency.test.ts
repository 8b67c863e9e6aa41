import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { unique } from "../support/Ids.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { conversationOn, messageCount, send } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const sandboxSends = async (channelId: number) => {
  const [{ n }] = await query<{ n: number }>(
    server,
    "SELECT count(*)::int AS n FROM messages WHERE channel_id = $1 AND direction = 'outbound' AND external_message_id IS NOT NULL",
    [channelId]
  )
  return n
}

describe("Idempotency-Key on POST /v1/messages/send", () => {
  it("replays the first answer (status and body) without sending again", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const key = unique("key")
    const body = { channel_id: c.channelId, thread_id: c.threadId, text: "once" }
    const first = await send(server, a.token, body, { "idempotency-key": key })
    assert.strictEqual(first.status, 201, JSON.stringify(first.body))
    const again = await send(server, a.token, { text: "once", thread_id: c.threadId, channel_id: c.channelId }, { "idempotency-key": key })
    assert.strictEqual(again.status, 201)
    assert.deepStrictEqual(again.body, first.body)
    assert.strictEqual(await sandboxSends(c.channelId), 1)
    assert.strictEqual(await messageCount(server, a.id), 2)
  })

  it("answers 422 for the same key with a different body, and 422 for a key over 128 characters", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const key = unique("key")
    assert.strictEqual((await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "one" }, { "idempotency-key": key })).status, 201)
    const other = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "two" }, { "idempotency-key": key })
    assert.strictEqual(other.status, 422)
    assert.strictEqual(other.body.error_code, "idempotency_key_mismatch")
    const long = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "x" }, { "idempotency-key": "k".repeat(129) })
    assert.strictEqual(long.status, 422)
    assert.ok(long.body.errors["idempotency-key"])
    const max = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "x" }, { "idempotency-key": "k".repeat(128) })
    assert.strictEqual(max.status, 201)
    assert.strictEqual(await messageCount(server, a.id), 3)
  })

  it("does not burn a key on a validation failure or a refusal", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const key = unique("key")
    const invalid = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId }, { "idempotency-key": key })
    assert.strictEqual(invalid.status, 422)
    const contactId = (await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [c.conversationId]))[0].contact_id
    await query(server, "UPDATE contacts SET blocked_at = now() WHERE id = $1", [contactId])
    const body = { channel_id: c.channelId, thread_id: c.threadId, text: "later" }
    const refused = await send(server, a.token, body, { "idempotency-key": key })
    assert.strictEqual(refused.body.error_code, "contact_blocked")
    await query(server, "UPDATE contacts SET blocked_at = NULL WHERE id = $1", [contactId])
    const ok = await send(server, a.token, body, { "idempotency-key": key })
    assert.strictEqual(ok.status, 201, JSON.stringify(ok.body))
  })

  it("scopes keys to the user and the endpoint, and keeps them 24 hours", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const person = await addUser(server, a.id, { role: "admin" })
    const personal = (await mobileLogin(server, person.email, person.password)).body.data.token as string
    const key = unique("key")
    const body = { channel_id: c.channelId, thread_id: c.threadId, text: "shared key" }
    const mine = await send(server, a.token, body, { "idempotency-key": key })
    const theirs = await send(server, personal, body, { "idempotency-key": key })
    assert.strictEqual(theirs.status, 201)
    assert.notStrictEqual(theirs.body.data.id, mine.body.data.id)
    const direct = await request(server, "POST", "/v1/messages", {
      token: a.token,
      body: { thread_id: c.threadId, text: "shared key", idempotency_key: key }
    })
    assert.strictEqual(direct.status, 201)
    assert.notStrictEqual(direct.body.data.id, mine.body.data.id)

    await query(server, "UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = $1", [key])
    const expired = await send(server, a.token, { ...body, text: "a new body is fine after expiry" }, { "idempotency-key": key })
    assert.strictEqual(expired.status, 201)
    assert.notStrictEqual(expired.body.data.id, mine.body.data.id)
  })

  it("keeps companies apart: the same key makes one message in each, and B never gets A's replay", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const ca = await conversationOn(server, a.token)
    const cb = await conversationOn(server, b.token)
    const key = unique("key")
    const bodyA = { channel_id: ca.channelId, thread_id: ca.threadId, text: "same key" }
    const first = await send(server, a.token, bodyA, { "idempotency-key": key })
    assert.strictEqual(first.status, 201, JSON.stringify(first.body))
    const theirs = await send(server, b.token, { channel_id: cb.channelId, thread_id: cb.threadId, text: "same key" }, { "idempotency-key": key })
    assert.strictEqual(theirs.status, 201, JSON.stringify(theirs.body))
    assert.notStrictEqual(theirs.body.data.id, first.body.data.id)
    assert.strictEqual(theirs.body.data.thread_id, cb.threadId)
    assert.strictEqual(await sandboxSends(ca.channelId), 1)
    assert.strictEqual(await sandboxSends(cb.channelId), 1)
    assert.strictEqual(await messageCount(server, a.id), 2)
    assert.strictEqual(await messageCount(server, b.id), 2)
    const kept = await query<{ company_id: number }>(server, "SELECT company_id FROM idempotency_keys WHERE key = $1 ORDER BY company_id", [key])
    assert.deepStrictEqual(kept.map((r) => r.company_id), [a.id, b.id].sort((x, y) => x - y))

    // B repeating A's request to the letter, key included: A's channel is not B's, so no replay of A's answer.
    const copied = await send(server, b.token, bodyA, { "idempotency-key": key })
    assert.ok(copied.status === 404 || copied.status === 422, `${copied.status} ${JSON.stringify(copied.body)}`)
    assert.strictEqual(copied.body.data, undefined)
    const fresh = unique("key")
    assert.strictEqual((await send(server, a.token, { ...bodyA, text: "only A's" }, { "idempotency-key": fresh })).status, 201)
    const stolen = await send(server, b.token, { ...bodyA, text: "only A's" }, { "idempotency-key": fresh })
    assert.strictEqual(stolen.status, 404, JSON.stringify(stolen.body))
    assert.deepStrictEqual(stolen.body, { message: "Channel not found." })

    const replayed = await send(server, a.token, bodyA, { "idempotency-key": key })
    assert.deepStrictEqual(replayed.body, first.body)
    assert.strictEqual(await messageCount(server, a.id), 3)
    assert.strictEqual(await messageCount(server, b.id), 2)
  })

  it("answers 409 while the first request still holds the key, and settles a key abandoned mid-send", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const me = (await request(server, "GET", "/v1/me", { token: a.token })).body.data.id as number
    const body = { channel_id: c.channelId, thread_id: c.threadId, text: "in flight" }
    const first = await send(server, a.token, body, { "idempotency-key": unique("probe") })
    const hash = (await query<{ request_hash: string }>(
      server,
      "SELECT request_hash FROM idempotency_keys WHERE user_id = $1 ORDER BY created_at DESC LIMIT 1",
      [me]
    ))[0].request_hash
    const running = unique("key")
    await query(
      server,
      "INSERT INTO idempotency_keys (company_id, user_id, endpoint, key, request_hash, state, response_body) VALUES ($1, $2, 'send', $3, $4, 'pending', '{\"message_id\": null}')",
      [a.id, me, running, hash]
    )
    const busy = await send(server, a.token, body, { "idempotency-key": running })
    assert.strictEqual(busy.status, 409)
    assert.deepStrictEqual(busy.body, { message: "A request with this idempotency key is still being processed." })

    // A process that died between the two transactions left its key pending with the message it wrote.
    const abandoned = unique("key")
    await query(
      server,
      "INSERT INTO idempotency_keys (company_id, user_id, endpoint, key, request_hash, state, response_body, created_at) VALUES ($1, $2, 'send', $3, $4, 'pending', $5::jsonb, now() - interval '2 minutes')",
      [a.id, me, abandoned, hash, JSON.stringify({ message_id: first.body.data.id })]
    )
    const settled = await send(server, a.token, body, { "idempotency-key": abandoned })
    assert.strictEqual(settled.status, 201, JSON.stringify(settled.body))
    assert.strictEqual(settled.body.data.id, first.body.data.id)
    const [row] = await query<{ state: string }>(server, "SELECT state FROM idempotency_keys WHERE key = $1", [abandoned])
    assert.strictEqual(row.state, "done")
  })

  it("turns 50 concurrent duplicates into exactly one message", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const key = unique("key")
    const body = { channel_id: c.channelId, thread_id: c.threadId, text: "fifty at once" }
    const answers = await Promise.all(Array.from({ length: 50 }, () => send(server, a.token, body, { "idempotency-key": key })))
    const statuses = answers.map((r) => r.status)
    assert.ok(statuses.every((s) => s === 201 || s === 409), JSON.stringify(statuses))
    const ids = new Set(answers.filter((r) => r.status === 201).map((r) => r.body.data.id))
    assert.strictEqual(ids.size, 1)
    const [{ n }] = await query<{ n: number }>(
      server,
      "SELECT count(*)::int AS n FROM messages WHERE thread_id = $1 AND message_content = 'fifty at once'",
      [c.threadId]
    )
    assert.strictEqual(n, 1)
    assert.strictEqual(await sandboxSends(c.channelId), 1)
    const after = await send(server, a.token, body, { "idempotency-key": key })
    assert.strictEqual(after.status, 201)
    assert.strictEqual(after.body.data.id, [...ids][0])
  })
})

describe("idempotency_key in the body of POST /v1/messages and forward", () => {
  it("replays a direct create, refuses a different body, and caps the key at 100 characters", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const key = unique("key")
    const first = await request(server, "POST", "/v1/messages", { token: a.token, body: { thread_id: c.threadId, text: "direct", idempotency_key: key } })
    assert.strictEqual(first.status, 201)
    const again = await request(server, "POST", "/v1/messages", { token: a.token, body: { thread_id: c.threadId, text: "direct", idempotency_key: key } })
    assert.strictEqual(again.status, 201)
    assert.deepStrictEqual(again.body, first.body)
    const changed = await request(server, "POST", "/v1/messages", { token: a.token, body: { thread_id: c.threadId, text: "changed", idempotency_key: key } })
    assert.strictEqual(changed.status, 422)
    assert.strictEqual(changed.body.error_code, "idempotency_key_mismatch")
    const long = await request(server, "POST", "/v1/messages", { token: a.token, body: { thread_id: c.threadId, text: "x", idempotency_key: "k".repeat(101) } })
    assert.strictEqual(long.status, 422)
    assert.ok(long.body.errors.idempotency_key)
    assert.strictEqual(await messageCount(server, a.id), 2)
  })

  it("replays a forward, and a different source message with the same key is a mismatch", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const target = await conversationOn(server, a.token)
    const key = unique("key")
    const first = await request(server, "POST", `/v1/messages/${c.inboundId}/forward`, {
      token: a.token,
      body: { target_thread_id: target.threadId, idempotency_key: key }
    })
    assert.strictEqual(first.status, 201, JSON.stringify(first.body))
    const again = await request(server, "POST", `/v1/messages/${c.inboundId}/forward`, {
      token: a.token,
      body: { target_thread_id: target.threadId, idempotency_key: key }
    })
    assert.deepStrictEqual(again.body, first.body)
    const otherSource = await request(server, "POST", `/v1/messages/${target.inboundId}/forward`, {
      token: a.token,
      body: { target_thread_id: c.threadId, idempotency_key: key }
    })
    assert.strictEqual(otherSource.status, 422)
    assert.strictEqual(otherSource.body.error_code, "idempotency_key_mismatch")
    assert.strictEqual(await messageCount(server, a.id), 3)
  })
})

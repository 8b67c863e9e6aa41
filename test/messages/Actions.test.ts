import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { unique } from "../support/Ids.ts"
import { payloadsOf, query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { type ChannelType, conversationOn, createChannel, inbound, send, threadOf } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const sent = async (token: string, type: ChannelType = "msgr_b", text = "hello") => {
  const c = await conversationOn(server, token, type)
  const res = await send(server, token, { channel_id: c.channelId, thread_id: c.threadId, text })
  if (res.status !== 201) throw new Error(JSON.stringify(res.body))
  return { ...c, message: res.body.data }
}

const age = (id: number, interval: string) =>
  query(server, `UPDATE messages SET created_at = now() - interval '${interval}' WHERE id = $1`, [id])

/** Every message route, for the cross-tenant check. */
const routes = (id: number): Array<[string, string, unknown?]> => [
  ["GET", `/v1/messages/${id}`],
  ["PATCH", `/v1/messages/${id}`, { text: "x" }],
  ["DELETE", `/v1/messages/${id}`],
  ["GET", `/v1/messages/${id}/around`],
  ["GET", `/v1/messages/${id}/statuses`],
  ["POST", `/v1/messages/${id}/statuses`, { status: "read" }],
  ["GET", `/v1/messages/${id}/reactions`],
  ["POST", `/v1/messages/${id}/reactions`, { reaction: "👍" }],
  ["DELETE", `/v1/messages/${id}/reactions`],
  ["POST", `/v1/messages/${id}/like`],
  ["POST", `/v1/messages/${id}/forward`, { target_thread_id: 1 }]
]

describe("message routes", () => {
  it("answer 404 'Message not found.' for another company's message and leave it untouched", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const theirs = await sent(b.token)
    for (const [method, path, body] of routes(theirs.message.id)) {
      const res = await request(server, method, path, { token: a.token, body })
      assert.strictEqual(res.status, 404, `${method} ${path}`)
      assert.deepStrictEqual(res.body, { message: "Message not found." }, `${method} ${path}`)
    }
    const still = await request(server, "GET", `/v1/messages/${theirs.message.id}`, { token: b.token })
    assert.deepStrictEqual(still.body.data.message_content, "hello")
    assert.strictEqual(still.body.data.deleted_at, null)
    assert.deepStrictEqual((await request(server, "GET", `/v1/messages/${theirs.message.id}/reactions`, { token: b.token })).body.data, [])
  })

  it("answer 401 without credentials", async () => {
    for (const [method, path, body] of routes(1)) {
      const res = await request(server, method, path, { body })
      assert.strictEqual(res.status, 401, `${method} ${path}`)
    }
  })
})

describe("GET /v1/messages/{id}", () => {
  it("returns the message with deadlines: none for inbound, none past the window", async () => {
    const a = await createCompany(server)
    const s = await sent(a.token)
    const got = await request(server, "GET", `/v1/messages/${s.message.id}`, { token: a.token })
    assert.strictEqual(got.status, 200)
    assert.strictEqual(got.body.data.id, s.message.id)
    const created = Date.parse(got.body.data.created_at)
    assert.strictEqual(Date.parse(got.body.data.can_edit_until) - created, 48 * 3600_000)
    assert.strictEqual(Date.parse(got.body.data.can_revoke_until) - created, 48 * 3600_000)
    const incoming = await request(server, "GET", `/v1/messages/${s.inboundId}`, { token: a.token })
    assert.strictEqual(incoming.body.data.can_edit_until, null)
    assert.strictEqual(incoming.body.data.can_revoke_until, null)
    await age(s.message.id, "49 hours")
    const old = await request(server, "GET", `/v1/messages/${s.message.id}`, { token: a.token })
    assert.strictEqual(old.body.data.can_edit_until, null)
    assert.strictEqual(old.body.data.can_revoke_until, null)
    const missing = await request(server, "GET", "/v1/messages/999999999", { token: a.token })
    assert.strictEqual(missing.status, 404)
  })
})

describe("PATCH /v1/messages/{id}", () => {
  it("edits own outbound text inside the window and emits message.updated", async () => {
    const a = await createCompany(server)
    const s = await sent(a.token)
    const res = await request(server, "PATCH", `/v1/messages/${s.message.id}`, { token: a.token, body: { text: "edited" } })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.message_content, "edited")
    assert.isString(res.body.data.edited_at)
    const updated = (await payloadsOf(server, a.id, "message.updated")).filter((p) => p.change === "edited")
    assert.strictEqual(updated.length, 1)
    assert.strictEqual(updated[0].message.message_content, "edited")
  })

  it("refuses inbound, expired, deleted, non-editable channels and empty text", async () => {
    const a = await createCompany(server)
    const s = await sent(a.token)
    const inboundEdit = await request(server, "PATCH", `/v1/messages/${s.inboundId}`, { token: a.token, body: { text: "x" } })
    assert.strictEqual(inboundEdit.status, 422)
    assert.strictEqual(inboundEdit.body.error_code, "not_editable")
    const empty = await request(server, "PATCH", `/v1/messages/${s.message.id}`, { token: a.token, body: { text: " " } })
    assert.strictEqual(empty.status, 422)
    assert.ok(empty.body.errors.text)
    await age(s.message.id, "49 hours")
    const late = await request(server, "PATCH", `/v1/messages/${s.message.id}`, { token: a.token, body: { text: "x" } })
    assert.strictEqual(late.body.error_code, "edit_window_closed")
    const social = await sent(a.token, "msgr_c_business")
    const noEdits = await request(server, "PATCH", `/v1/messages/${social.message.id}`, { token: a.token, body: { text: "x" } })
    assert.strictEqual(noEdits.body.error_code, "edit_not_supported")
    const other = await sent(a.token)
    await request(server, "DELETE", `/v1/messages/${other.message.id}`, { token: a.token })
    const gone = await request(server, "PATCH", `/v1/messages/${other.message.id}`, { token: a.token, body: { text: "x" } })
    assert.strictEqual(gone.body.error_code, "message_deleted")
  })
})

describe("DELETE /v1/messages/{id}", () => {
  it("soft-deletes without a body: text nulled, deleted_at set, repeat is a no-op", async () => {
    const a = await createCompany(server)
    const s = await sent(a.token)
    const res = await request(server, "DELETE", `/v1/messages/${s.message.id}`, { token: a.token })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.message_content, null)
    assert.isString(res.body.data.deleted_at)
    assert.strictEqual(res.body.data.revoked_at, null)
    assert.strictEqual(res.body.data.can_edit_until, null)
    assert.strictEqual(res.body.data.can_revoke_until, null)
    const again = await request(server, "DELETE", `/v1/messages/${s.message.id}`, { token: a.token, body: {} })
    assert.strictEqual(again.status, 200)
    assert.strictEqual(again.body.data.deleted_at, res.body.data.deleted_at)
    assert.strictEqual((await payloadsOf(server, a.id, "message.updated")).filter((p) => p.change === "deleted").length, 1)
    const inboundDelete = await request(server, "DELETE", `/v1/messages/${s.inboundId}`, { token: a.token })
    assert.strictEqual(inboundDelete.status, 422)
  })

  it("revokes with {mode:'revoke'} inside the window; 422 on msgr_a_business, after the window, or a bad mode", async () => {
    const a = await createCompany(server)
    const s = await sent(a.token, "msgr_a")
    const res = await request(server, "DELETE", `/v1/messages/${s.message.id}`, { token: a.token, body: { mode: "revoke" } })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.isString(res.body.data.revoked_at)
    assert.strictEqual(res.body.data.message_content, null)
    assert.strictEqual((await payloadsOf(server, a.id, "message.updated")).filter((p) => p.change === "revoked").length, 1)

    const business = await sent(a.token, "msgr_a_business")
    const refused = await request(server, "DELETE", `/v1/messages/${business.message.id}`, { token: a.token, body: { mode: "revoke" } })
    assert.strictEqual(refused.status, 422)
    assert.strictEqual(refused.body.error_code, "revoke_not_supported")
    const unchanged = await request(server, "GET", `/v1/messages/${business.message.id}`, { token: a.token })
    assert.strictEqual(unchanged.body.data.deleted_at, null)

    const old = await sent(a.token, "msgr_c_business")
    await age(old.message.id, "25 hours")
    const late = await request(server, "DELETE", `/v1/messages/${old.message.id}`, { token: a.token, body: { mode: "revoke" } })
    assert.strictEqual(late.body.error_code, "revoke_window_closed")
    const bad = await request(server, "DELETE", `/v1/messages/${old.message.id}`, { token: a.token, body: { mode: "shred" } })
    assert.strictEqual(bad.status, 422)
    assert.ok(bad.body.errors.mode)
  })
})

describe("GET /v1/messages/{id}/around", () => {
  it("returns the window of the conversation around the message, oldest first", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const ids = [c.inboundId]
    for (let i = 0; i < 6; i++) ids.push((await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: `m${i}` })).body.data.id)
    for (const [i, id] of ids.entries()) {
      await query(server, "UPDATE messages SET \"timestamp\" = now() - make_interval(mins => $1) WHERE id = $2", [60 - i, id])
    }
    const res = await request(server, "GET", `/v1/messages/${ids[3]}/around?limit=2`, { token: a.token })
    assert.strictEqual(res.status, 200)
    assert.deepStrictEqual(res.body.data.items.map((m: any) => m.id), ids.slice(1, 6))
    assert.strictEqual(res.body.data.anchor_id, ids[3])
    assert.strictEqual(res.body.data.has_more_before, true)
    assert.strictEqual(res.body.data.has_more_after, true)
    const edge = await request(server, "GET", `/v1/messages/${ids[0]}/around`, { token: a.token })
    assert.deepStrictEqual(edge.body.data.items.map((m: any) => m.id), ids)
    assert.strictEqual(edge.body.data.has_more_before, false)
    assert.strictEqual(edge.body.data.has_more_after, false)
    const bad = await request(server, "GET", `/v1/messages/${ids[0]}/around?limit=51`, { token: a.token })
    assert.strictEqual(bad.status, 422)
  })

  it("is throttled at 120 requests a minute per token", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const answers = await Promise.all(
      Array.from({ length: 121 }, () => request(server, "GET", `/v1/messages/${c.inboundId}/around?limit=1`, { token: a.token }))
    )
    const statuses = answers.map((r) => r.status)
    assert.strictEqual(statuses.filter((s) => s === 200).length, 120)
    const limited = answers.find((r) => r.status === 429)!
    assert.strictEqual(limited.body.message, "Too Many Requests.")
    assert.ok(Number(limited.headers.get("retry-after")) > 0)
  })
})

describe("statuses", () => {
  it("POST records a delivery status, updates the message and the history; GET lists it oldest first", async () => {
    const a = await createCompany(server)
    const s = await sent(a.token)
    const read = await request(server, "POST", `/v1/messages/${s.message.id}/statuses`, { token: a.token, body: { status: "read" } })
    assert.strictEqual(read.status, 201, JSON.stringify(read.body))
    assert.strictEqual(read.body.data.status, "read")
    const failed = await request(server, "POST", `/v1/messages/${s.message.id}/statuses`, {
      token: a.token,
      body: { status: "failed", error: "bounced" }
    })
    assert.strictEqual(failed.body.data.error, "bounced")
    const history = await request(server, "GET", `/v1/messages/${s.message.id}/statuses`, { token: a.token })
    assert.deepStrictEqual(history.body.data.map((h: any) => h.status), ["sent", "read", "failed"])
    assert.strictEqual((await request(server, "GET", `/v1/messages/${s.message.id}`, { token: a.token })).body.data.status, "failed")
    const bad = await request(server, "POST", `/v1/messages/${s.message.id}/statuses`, { token: a.token, body: { status: "seen" } })
    assert.strictEqual(bad.status, 422)
    assert.ok(bad.body.errors.status)
    const inboundStatus = await request(server, "POST", `/v1/messages/${s.inboundId}/statuses`, { token: a.token, body: { status: "read" } })
    assert.strictEqual(inboundStatus.status, 422)
  })
})

describe("reactions", () => {
  it("sets, replaces and removes the one outbound reaction, with message.reaction.updated", async () => {
    const a = await createCompany(server)
    const s = await sent(a.token)
    const set = await request(server, "POST", `/v1/messages/${s.inboundId}/reactions`, { token: a.token, body: { reaction: "👍" } })
    assert.strictEqual(set.status, 200, JSON.stringify(set.body))
    assert.strictEqual(set.body.data.reaction, "👍")
    assert.strictEqual(set.body.data.direction, "outbound")
    const me = (await request(server, "GET", "/v1/me", { token: a.token })).body.data.id
    assert.strictEqual(set.body.data.author_user_id, me)
    const replaced = await request(server, "POST", `/v1/messages/${s.inboundId}/reactions`, { token: a.token, body: { reaction: "❤️" } })
    assert.strictEqual(replaced.body.data.id, set.body.data.id)
    const listed = await request(server, "GET", `/v1/messages/${s.inboundId}/reactions`, { token: a.token })
    assert.deepStrictEqual(listed.body.data.map((r: any) => r.reaction), ["❤️"])
    const removed = await request(server, "DELETE", `/v1/messages/${s.inboundId}/reactions`, { token: a.token })
    assert.strictEqual(removed.status, 200)
    assert.deepStrictEqual(removed.body.data, { message: "Reaction removed.", removed: true })
    const none = await request(server, "DELETE", `/v1/messages/${s.inboundId}/reactions`, { token: a.token })
    assert.strictEqual(none.status, 200)
    assert.strictEqual(none.body.data.removed, false)
    const events = await payloadsOf(server, a.id, "message.reaction.updated")
    assert.deepStrictEqual(events.map((e) => [e.action, e.replaced]), [["added", false], ["added", true], ["removed", false]])
    assert.strictEqual(events[0].message_id, s.inboundId)
  })

  it("validates the reaction and its author", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const s = await sent(a.token)
    const post = (body: unknown) => request(server, "POST", `/v1/messages/${s.inboundId}/reactions`, { token: a.token, body })
    const longest = "😀".repeat(32)
    assert.strictEqual((await post({ reaction: longest })).status, 200)
    const cases: Array<[unknown, string]> = [
      [{}, "reaction"],
      [{ reaction: "" }, "reaction"],
      [{ reaction: "x".repeat(33) }, "reaction"],
      [{ reaction: "👍", author_user_id: b.admin.id }, "author_user_id"],
      [{ reaction: "👍", author_contact_account_id: 999999999 }, "author_contact_account_id"],
      [{ reaction: "👍", author_user_id: 1, author_contact_account_id: 1 }, "author_user_id"]
    ]
    for (const [body, field] of cases) {
      const res = await post(body)
      assert.strictEqual(res.status, 422, JSON.stringify(body))
      assert.ok(res.body.errors?.[field], `${JSON.stringify(body)} → ${JSON.stringify(res.body)}`)
    }
    const [{ contact_account_id }] = await query<any>(server, "SELECT contact_account_id FROM messages WHERE id = $1", [s.inboundId])
    const byContact = await post({ reaction: "👍", author_contact_account_id: contact_account_id })
    assert.strictEqual(byContact.body.data.author_contact_account_id, contact_account_id)
    assert.strictEqual(byContact.body.data.author_user_id, null)
  })
})

describe("POST /v1/messages/{id}/like", () => {
  it("likes a comment with an external id in a msgr_c_business comment thread (flat body); 422 otherwise", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_c_business")
    const comment = await inbound(server, a.token, channel, { thread: { external_id: unique("post"), is_group: true }, text: "nice" })
    const liked = await request(server, "POST", `/v1/messages/${comment.message_id}/like`, { token: a.token })
    assert.strictEqual(liked.status, 200, JSON.stringify(liked.body))
    assert.deepStrictEqual(liked.body, { message: "Comment liked." })

    const direct = await inbound(server, a.token, channel, { text: "a DM" })
    const dm = await request(server, "POST", `/v1/messages/${direct.message_id}/like`, { token: a.token })
    assert.strictEqual(dm.status, 422)
    assert.strictEqual(dm.body.error_code, "not_a_comment")

    const telegram = await conversationOn(server, a.token, "msgr_b")
    const other = await request(server, "POST", `/v1/messages/${telegram.inboundId}/like`, { token: a.token })
    assert.strictEqual(other.status, 422)

    const { thread_id } = await threadOf(server, comment.message_id)
    await query(server, "UPDATE channels SET settings = '{\"sandbox_fail\": true}' WHERE id = $1", [channel])
    const failed = await request(server, "POST", "/v1/messages", { token: a.token, body: { thread_id, text: "our reply" } })
    assert.strictEqual(failed.body.data.external_message_id, null)
    await query(server, "UPDATE channels SET settings = '{}' WHERE id = $1", [channel])
    const noExternal = await request(server, "POST", `/v1/messages/${failed.body.data.id}/like`, { token: a.token })
    assert.strictEqual(noExternal.status, 422)
    assert.strictEqual(noExternal.body.error_code, "no_external_id")
  })
})

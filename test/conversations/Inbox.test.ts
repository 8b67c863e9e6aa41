import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll } from "vitest"
import { sweepSnoozed } from "../../src/conversations/Snooze.ts"
import { ConversationsRepo } from "../../src/conversations/Repo.ts"
import { addUser, mobileLogin } from "../auth/support.ts"
import { conversationOn, createChannel, externalIdOf, inbound, send } from "../messages/support.ts"
import { payloadsOf, query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { act, agentIn, conversation, eventually, list } from "./support.ts"

let server: RunningServer
// Building a server (migrations on PGlite) is slow on a loaded machine.
beforeAll(async () => {
  server = await startServer()
}, 300_000)
afterAll(() => server?.close())

const ids = (res: { body: any }) => res.body.data.items.map((c: any) => c.id)
const later = (ms: number) => new Date(Date.now() + ms).toISOString()

/** The contact of `c` writes again on the same channel. */
const again = async (token: string, c: { channelId: number; threadId: number }, text = "again") =>
  inbound(server, token, c.channelId, { from: { external_id: await externalIdOf(server, c.threadId) }, text })

describe("conversation fields", () => {
  it("keeps the last message, unread count, waiting_since and first_reply_at from the messages", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    let data = await conversation(server, a.token, c.conversationId)
    assert.strictEqual(data.status, "open")
    assert.strictEqual(data.priority, null)
    assert.strictEqual(data.assignee, null)
    assert.strictEqual(data.team, null)
    assert.deepStrictEqual({ ...data.last_message, timestamp: typeof data.last_message.timestamp }, {
      id: c.inboundId,
      direction: "inbound",
      type: "text",
      preview: "hello",
      timestamp: "string"
    })
    assert.strictEqual(data.unread_count, 1)
    assert.isString(data.waiting_since)
    assert.strictEqual(data.first_reply_at, null)
    const waiting = data.waiting_since

    await again(a.token, c, "are you there?")
    data = await conversation(server, a.token, c.conversationId)
    assert.strictEqual(data.unread_count, 2)
    assert.strictEqual(data.last_message.preview, "are you there?")
    assert.strictEqual(data.waiting_since, waiting, "waiting counts from the first unanswered message")

    const reply = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "here" })
    assert.strictEqual(reply.status, 201, JSON.stringify(reply.body))
    data = await conversation(server, a.token, c.conversationId)
    assert.strictEqual(data.waiting_since, null)
    assert.isString(data.first_reply_at)
    assert.strictEqual(data.last_message.direction, "outbound")
    assert.strictEqual(data.unread_count, 2, "an outbound message is never unread")
    const firstReply = data.first_reply_at

    await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "second" })
    assert.strictEqual((await conversation(server, a.token, c.conversationId)).first_reply_at, firstReply)
  })

  it("marks read up to a message, per operator", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const second = await again(a.token, c)
    await again(a.token, c)
    const agent = await agentIn(server, a.id, [c.channelId])

    const upTo = await act(server, a.token, c.conversationId, "read", { message_id: second.message_id })
    assert.strictEqual(upTo.status, 200, JSON.stringify(upTo.body))
    assert.strictEqual(upTo.body.data.unread_count, 1)
    assert.strictEqual((await conversation(server, agent.token, c.conversationId)).unread_count, 3, "another operator's reads are their own")
    // Reading an earlier message does not move the mark back.
    const back = await act(server, a.token, c.conversationId, "read", { message_id: c.inboundId })
    assert.strictEqual(back.body.data.unread_count, 1)
    const all = await act(server, a.token, c.conversationId, "read", {})
    assert.strictEqual(all.body.data.unread_count, 0)
    await again(a.token, c)
    assert.strictEqual((await conversation(server, a.token, c.conversationId)).unread_count, 1)

    const other = await conversationOn(server, a.token)
    const foreign = await act(server, a.token, c.conversationId, "read", { message_id: other.inboundId })
    assert.strictEqual(foreign.status, 422)
    assert.deepStrictEqual(Object.keys(foreign.body.errors), ["message_id"])
  })
})

describe("POST /v1/conversations/{id}/status", () => {
  it("resolves, and the contact's next message reopens with an event", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const resolved = await act(server, a.token, c.conversationId, "status", { status: "resolved" })
    assert.strictEqual(resolved.status, 200)
    assert.strictEqual(resolved.body.data.status, "resolved")
    await again(a.token, c)
    assert.strictEqual((await conversation(server, a.token, c.conversationId)).status, "open")
    const changes = await eventually(async () => {
      const rows = await payloadsOf(server, a.id, "conversation.status_changed")
      return rows.length === 2 ? rows : undefined
    })
    assert.deepStrictEqual(changes.map((p: any) => [p.conversation_id, p.from, p.to, p.reason]), [
      [c.conversationId, "open", "resolved", "user"],
      [c.conversationId, "resolved", "open", "inbound"]
    ])
    const updated = await payloadsOf(server, a.id, "conversation.updated")
    assert.deepStrictEqual(updated.map((p: any) => p.changes), [["status"]])
  })

  it("snoozes until a time in the future; the contact's next message ends the snooze", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const missing = await act(server, a.token, c.conversationId, "status", { status: "snoozed" })
    assert.strictEqual(missing.status, 422)
    assert.deepStrictEqual(Object.keys(missing.body.errors), ["snoozed_until"])
    const past = await act(server, a.token, c.conversationId, "status", { status: "snoozed", snoozed_until: later(-60_000) })
    assert.strictEqual(past.status, 422)
    const bad = await act(server, a.token, c.conversationId, "status", { status: "sleeping" })
    assert.strictEqual(bad.status, 422)
    const until = later(3_600_000)
    const snoozed = await act(server, a.token, c.conversationId, "status", { status: "snoozed", snoozed_until: until })
    assert.strictEqual(snoozed.status, 200)
    assert.strictEqual(snoozed.body.data.status, "snoozed")
    assert.strictEqual(snoozed.body.data.snoozed_until, new Date(until).toISOString())
    await again(a.token, c)
    const data = await conversation(server, a.token, c.conversationId)
    assert.strictEqual(data.status, "open")
    assert.strictEqual(data.snoozed_until, null)
  })

  it("reopens a snoozed conversation when its time comes, by the clock the sweep reads", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const until = Date.now() + 3_600_000
    await act(server, a.token, c.conversationId, "status", { status: "snoozed", snoozed_until: new Date(until).toISOString() })
    const sweepAt = (ms: number) =>
      server.runInApp(Effect.gen(function*() {
        yield* TestClock.setTime(ms)
        return yield* sweepSnoozed
      }).pipe(Effect.provide([TestClock.layer(), ConversationsRepo.layer])))
    await sweepAt(until - 1_000)
    assert.strictEqual((await conversation(server, a.token, c.conversationId)).status, "snoozed")
    await sweepAt(until + 1_000)
    const data = await conversation(server, a.token, c.conversationId)
    assert.strictEqual(data.status, "open")
    assert.strictEqual(data.snoozed_until, null)
    const changes = await payloadsOf(server, a.id, "conversation.status_changed")
    assert.deepStrictEqual(changes.map((p: any) => [p.from, p.to, p.reason]), [["open", "snoozed", "user"], ["snoozed", "open", "snooze_expired"]])
  })
})

describe("POST /v1/conversations/{id}/assignment", () => {
  it("assigns a member who sees the channel and a team, and unassigns", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const agent = await agentIn(server, a.id, [c.channelId])
    const blind = await agentIn(server, a.id, [])
    const refused = await act(server, a.token, c.conversationId, "assignment", { assignee_id: blind.id })
    assert.strictEqual(refused.status, 422)
    assert.deepStrictEqual(Object.keys(refused.body.errors), ["assignee_id"])
    const stranger = await createCompany(server)
    assert.strictEqual((await act(server, a.token, c.conversationId, "assignment", { assignee_id: stranger.admin.id })).status, 422)
    const noTeam = await act(server, a.token, c.conversationId, "assignment", { team_id: 999999999 })
    assert.deepStrictEqual(Object.keys(noTeam.body.errors), ["team_id"])
    assert.strictEqual((await act(server, a.token, c.conversationId, "assignment", {})).status, 422)

    const assigned = await act(server, a.token, c.conversationId, "assignment", { assignee_id: agent.id, team_id: agent.teamId })
    assert.strictEqual(assigned.status, 200, JSON.stringify(assigned.body))
    assert.deepStrictEqual(assigned.body.data.assignee, { id: agent.id, name: "Person" })
    assert.deepStrictEqual(assigned.body.data.team, { id: agent.teamId, name: "Team" })
    const events = await payloadsOf(server, a.id, "conversation.assigned")
    assert.strictEqual(events.length, 1)
    assert.strictEqual(events[0].assigned_user_id, agent.id)
    assert.strictEqual(events[0].user_id, agent.id, "the assignee is told on their private-user channel")
    assert.isTrue(events[0].notified)

    const cleared = await act(server, a.token, c.conversationId, "assignment", { assignee_id: null })
    assert.strictEqual(cleared.body.data.assignee, null)
    assert.deepStrictEqual(cleared.body.data.team, { id: agent.teamId, name: "Team" })
  })

  it("honours the assignee's conversation_assigned push trigger and quiet hours", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const quiet = await agentIn(server, a.id, [c.channelId])
    const off = await agentIn(server, a.id, [c.channelId])
    const prefs = (token: string, body: unknown) => request(server, "PUT", "/v1/me/notification-preferences", { token, body })
    // A window covering the whole day but one minute, whichever the hour of the run.
    const now = new Date()
    const minute = (m: number) => `${String(Math.floor(m / 60) % 24).padStart(2, "0")}:${String(m % 60).padStart(2, "0")}`
    const at = now.getUTCHours() * 60 + now.getUTCMinutes()
    assert.strictEqual((await prefs(quiet.token, { quiet_hours: { enabled: true, start: minute(at + 1439), end: minute(at + 1438) } })).status, 200)
    assert.strictEqual((await prefs(off.token, { push_triggers: { conversation_assigned: false } })).status, 200)

    await act(server, a.token, c.conversationId, "assignment", { assignee_id: quiet.id })
    await act(server, a.token, c.conversationId, "assignment", { assignee_id: off.id })
    const events = await payloadsOf(server, a.id, "conversation.assigned")
    assert.deepStrictEqual(events.map((e: any) => [e.assigned_user_id, e.notified, "user_id" in e]), [[quiet.id, false, false], [off.id, false, false]])
  })
})

describe("POST /v1/conversations/{id}/priority", () => {
  it("sets and clears the priority, announced as conversation.updated", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const high = await act(server, a.token, c.conversationId, "priority", { priority: "high" })
    assert.strictEqual(high.body.data.priority, "high")
    assert.strictEqual((await act(server, a.token, c.conversationId, "priority", { priority: "extreme" })).status, 422)
    const none = await act(server, a.token, c.conversationId, "priority", { priority: null })
    assert.strictEqual(none.body.data.priority, null)
    const updated = await payloadsOf(server, a.id, "conversation.updated")
    assert.deepStrictEqual(updated.map((p: any) => [p.changes, p.from, p.to]), [[["priority"], null, "high"], [["priority"], "high", null]])
  })
})

describe("GET /v1/conversations filters", () => {
  it("filters by status, assignee, team, channel, priority, unread and contact, with counts", async () => {
    const a = await createCompany(server)
    const me = await addUser(server, a.id, { role: "manager" })
    const meToken = (await mobileLogin(server, me.email, me.password)).body.data.token as string
    const one = await conversationOn(server, a.token)
    const two = await conversationOn(server, a.token)
    const three = await conversationOn(server, a.token, "msgr_a")
    const agent = await agentIn(server, a.id, [one.channelId, two.channelId, three.channelId])
    await act(server, a.token, one.conversationId, "assignment", { assignee_id: me.id })
    await act(server, a.token, two.conversationId, "assignment", { assignee_id: agent.id, team_id: agent.teamId })
    await act(server, a.token, two.conversationId, "priority", { priority: "urgent" })
    await act(server, a.token, three.conversationId, "status", { status: "resolved" })
    await act(server, meToken, one.conversationId, "read", {})
    await query(server, "UPDATE contacts SET display_name = 'Zed Quill' WHERE id = (SELECT contact_id FROM conversations WHERE id = $1)", [
      two.conversationId
    ])

    const all = await list(server, meToken)
    assert.deepStrictEqual(ids(all), [three.conversationId, two.conversationId, one.conversationId])
    assert.deepStrictEqual(all.body.data.meta, { mine: 1, unassigned: 1, all: 3 })
    const check = async (params: string, expected: ReadonlyArray<number>, meta?: unknown) => {
      const res = await list(server, meToken, params)
      assert.strictEqual(res.status, 200, `${params}: ${JSON.stringify(res.body)}`)
      assert.deepStrictEqual(ids(res), expected, params)
      assert.strictEqual(res.body.data.pagination.total, expected.length, params)
      if (meta !== undefined) assert.deepStrictEqual(res.body.data.meta, meta, params)
    }
    await check("?status=open", [two.conversationId, one.conversationId], { mine: 1, unassigned: 0, all: 2 })
    await check("?status=resolved", [three.conversationId], { mine: 0, unassigned: 1, all: 1 })
    await check("?assignee=me", [one.conversationId], { mine: 1, unassigned: 1, all: 3 })
    await check("?assignee=unassigned", [three.conversationId])
    await check("?assignee=assigned", [two.conversationId, one.conversationId])
    await check(`?assignee=${agent.id}`, [two.conversationId])
    await check(`?team_id=${agent.teamId}`, [two.conversationId])
    await check(`?channel_id=${three.channelId}`, [three.conversationId])
    await check("?priority=urgent", [two.conversationId])
    await check("?priority=none", [three.conversationId, one.conversationId])
    await check("?unread=true", [three.conversationId, two.conversationId])
    await check("?q=zed%20q", [two.conversationId])
    await check("?status=open&unread=1&assignee=me", [], { mine: 0, unassigned: 0, all: 1 })

    // The agent's own view: `me` is the agent.
    const mine = await list(server, agent.token, "?assignee=me")
    assert.deepStrictEqual(ids(mine), [two.conversationId])

    for (const bad of ["?status=closed", "?assignee=someone", "?priority=1", "?unread=yes", "?team_id=x", "?cursor=%%%"]) {
      assert.strictEqual((await list(server, meToken, bad)).status, 422, bad)
    }
  })

  it("pages by cursor in order of last activity", async () => {
    const a = await createCompany(server)
    const made = []
    for (let i = 0; i < 5; i++) made.push(await conversationOn(server, a.token))
    const newest = made.map((c) => c.conversationId).reverse()
    const first = await list(server, a.token, "?perPage=2")
    assert.deepStrictEqual(ids(first), newest.slice(0, 2))
    const seen = [...ids(first)]
    let cursor: string | null = first.body.data.next_cursor
    while (cursor !== null) {
      const page = await list(server, a.token, `?perPage=2&cursor=${encodeURIComponent(cursor)}`)
      assert.strictEqual(page.status, 200)
      assert.strictEqual(page.body.data.pagination.total, 5)
      seen.push(...ids(page))
      cursor = page.body.data.next_cursor
    }
    assert.deepStrictEqual(seen, newest)
    // Activity moves a conversation to the front; the cursor of the first page still goes on from where it ended.
    await again(a.token, made[0])
    const fresh = await list(server, a.token, "?perPage=1")
    assert.deepStrictEqual(ids(fresh), [made[0].conversationId])
  })
})

describe("access", () => {
  it("an agent without the channel neither lists nor handles its conversations", async () => {
    const a = await createCompany(server)
    const seen = await conversationOn(server, a.token)
    const hidden = await conversationOn(server, a.token)
    const agent = await agentIn(server, a.id, [seen.channelId])
    const res = await list(server, agent.token)
    assert.deepStrictEqual(ids(res), [seen.conversationId])
    assert.deepStrictEqual(res.body.data.meta, { mine: 0, unassigned: 1, all: 1 })
    for (const [route, body] of [["assignment", { assignee_id: agent.id }], ["status", { status: "resolved" }], ["priority", { priority: "low" }], ["read", {}]] as const) {
      assert.strictEqual((await act(server, agent.token, hidden.conversationId, route, body)).status, 404, route)
      assert.strictEqual((await act(server, agent.token, seen.conversationId, route, body)).status, 200, route)
    }
  })

  it("answers 404 on every route for another company's conversation", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const theirs = await conversationOn(server, b.token)
    for (const [route, body] of [["assignment", { assignee_id: a.admin.id }], ["status", { status: "resolved" }], ["priority", { priority: "low" }], ["read", {}]] as const) {
      const res = await act(server, a.token, theirs.conversationId, route, body)
      assert.strictEqual(res.status, 404, route)
      assert.deepStrictEqual(res.body, { message: "Conversation not found." })
    }
    assert.strictEqual((await request(server, "GET", `/v1/conversations/${theirs.conversationId}`, { token: a.token })).status, 404)
    assert.deepStrictEqual(ids(await list(server, a.token)), [])
    const data = await conversation(server, b.token, theirs.conversationId)
    assert.strictEqual(data.status, "open")
    assert.strictEqual(data.priority, null)
    assert.strictEqual(data.unread_count, 1)
    assert.strictEqual((await act(server, a.token, theirs.conversationId, "read", {})).status, 404)
  })

  it("lists the new events in the catalog and replays them", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const catalog = await request(server, "GET", "/v1/system-events", { token: a.token })
    const keys = JSON.stringify(catalog.body)
    for (const key of ["conversation.updated", "conversation.assigned", "conversation.status_changed"]) assert.include(keys, key)
    await act(server, a.token, c.conversationId, "status", { status: "pending" })
    const replay = await request(server, "GET", "/v1/events?after=0&limit=100", { token: a.token })
    const items = JSON.stringify(replay.body)
    assert.include(items, "conversation.status_changed")
  })
})

describe("a second channel", () => {
  it("lists a conversation once when the contact writes on two channels", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const second = await createChannel(server, a.token, "msgr_b")
    await inbound(server, a.token, second, { from: { external_id: await externalIdOf(server, c.threadId) } })
    const res = await list(server, a.token)
    assert.deepStrictEqual(ids(res), [c.conversationId])
    assert.strictEqual(res.body.data.items[0].unread_count, 2)
    const agent = await agentIn(server, a.id, [second])
    assert.deepStrictEqual(ids(await list(server, agent.token, `?channel_id=${second}`)), [c.conversationId])
    assert.deepStrictEqual(ids(await list(server, agent.token, `?channel_id=${c.channelId}`)), [])
  })
})

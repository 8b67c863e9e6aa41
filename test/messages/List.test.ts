import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { conversationOn, createChannel, inbound, send, threadOf } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const list = (token: string, query: string) => request(server, "GET", `/v1/messages?${query}`, { token })
const ids = (res: { body: any }) => res.body.data.items.map((m: any) => m.id)

/** One conversation with 7 messages whose timestamps are one minute apart, oldest first. */
const seeded = async () => {
  const a = await createCompany(server)
  const c = await conversationOn(server, a.token)
  const created: Array<number> = [c.inboundId]
  for (let i = 1; i < 7; i++) {
    const res = i % 2 === 0
      ? (await inbound(server, a.token, c.channelId, {
        from: { external_id: (await query<any>(server, "SELECT ca.external_id FROM threads t JOIN contact_accounts ca ON ca.id = t.contact_account_id WHERE t.id = $1", [c.threadId]))[0].external_id },
        text: `inbound ${i} apple`
      })).message_id
      : (await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: `outbound ${i}` })).body.data.id
    created.push(res)
  }
  for (const [i, id] of created.entries()) {
    await query(server, "UPDATE messages SET \"timestamp\" = now() - make_interval(mins => $1) WHERE id = $2", [60 - i, id])
  }
  return { a, c, created }
}

describe("GET /v1/messages", () => {
  it("pages newest first by timestamp with page/perPage and the pagination block", async () => {
    const { a, c, created } = await seeded()
    const first = await list(a.token, `conversation_id=${c.conversationId}&perPage=3`)
    assert.strictEqual(first.status, 200)
    assert.deepStrictEqual(ids(first), created.slice().reverse().slice(0, 3))
    assert.deepStrictEqual(first.body.data.pagination, { page: 1, perPage: 3, total: 7, lastPage: 3 })
    const third = await list(a.token, `conversation_id=${c.conversationId}&perPage=3&page=3`)
    assert.deepStrictEqual(ids(third), [created[0]])
    const asc = await list(a.token, `conversation_id=${c.conversationId}&sortDir=asc&limit=2`)
    assert.deepStrictEqual(ids(asc), created.slice(0, 2))
    assert.strictEqual(asc.body.data.pagination.perPage, 2)
    const order = await list(a.token, `conversation_id=${c.conversationId}&order=asc&sortDir=desc&perPage=1`)
    assert.deepStrictEqual(ids(order), [created[6]], "explicit sortDir wins over order")
    const byId = await list(a.token, `conversation_id=${c.conversationId}&sortBy=id&order=asc`)
    assert.deepStrictEqual(ids(byId), created.slice().sort((x, y) => x - y))
    for (const sortBy of ["created_at", "updated_at"]) {
      const res = await list(a.token, `conversation_id=${c.conversationId}&sortBy=${sortBy}`)
      assert.strictEqual(res.body.data.items.length, 7)
    }
  })

  it("filters by conversation, thread, channel, direction, message type and text (search wins over q)", async () => {
    const { a, c, created } = await seeded()
    const other = await conversationOn(server, a.token)
    assert.strictEqual((await list(a.token, "")).body.data.pagination.total, 8)
    assert.deepStrictEqual(ids(await list(a.token, `thread_id=${other.threadId}`)), [other.inboundId])
    assert.deepStrictEqual(ids(await list(a.token, `channel_id=${other.channelId}`)), [other.inboundId])
    const outbound = await list(a.token, `conversation_id=${c.conversationId}&direction=outbound`)
    assert.deepStrictEqual(ids(outbound), [created[5], created[3], created[1]])
    assert.strictEqual((await list(a.token, `conversation_id=${c.conversationId}&message_type=text`)).body.data.items.length, 7)
    assert.strictEqual((await list(a.token, `conversation_id=${c.conversationId}&message_type=image`)).body.data.items.length, 0)
    assert.deepStrictEqual(ids(await list(a.token, "q=APPLE")), [created[6], created[4], created[2]])
    assert.deepStrictEqual(ids(await list(a.token, "search=outbound%205&q=apple")), [created[5]])
    assert.deepStrictEqual(ids(await list(a.token, "search=100%25")), [])
  })

  it("walks with cursors: before (older) and after (newer), aliases, limit and order; total and lastPage null", async () => {
    const { a, c, created } = await seeded()
    const base = `conversation_id=${c.conversationId}`
    const older = await list(a.token, `${base}&before_message_id=${created[4]}&limit=2`)
    assert.strictEqual(older.status, 200)
    assert.deepStrictEqual(ids(older), [created[3], created[2]])
    assert.deepStrictEqual(older.body.data.pagination, { page: 1, perPage: 2, total: null, lastPage: null })
    const olderAsc = await list(a.token, `${base}&before_id=${created[4]}&limit=2&order=asc`)
    assert.deepStrictEqual(ids(olderAsc), [created[2], created[3]])
    const newer = await list(a.token, `${base}&after_message_id=${created[2]}&perPage=2`)
    assert.deepStrictEqual(ids(newer), [created[4], created[3]])
    const newerAsc = await list(a.token, `${base}&after_id=${created[2]}&perPage=2&sortDir=asc`)
    assert.deepStrictEqual(ids(newerAsc), [created[3], created[4]])
    const byId = await list(a.token, `${base}&sortBy=id&before_id=${Math.max(...created)}&limit=50`)
    assert.strictEqual(byId.body.data.items.length, 6)
    const end = await list(a.token, `${base}&before_message_id=${created[0]}`)
    assert.deepStrictEqual(ids(end), [])
  })

  it("answers 422 for bad parameters and foreign cursors", async () => {
    const { a } = await seeded()
    const b = await createCompany(server)
    const cb = await conversationOn(server, b.token)
    const cases: Array<[string, string]> = [
      ["sortBy=name", "sortBy"],
      ["sortDir=up", "sortDir"],
      ["perPage=0", "perPage"],
      ["limit=101", "limit"],
      ["page=0", "page"],
      ["direction=sideways", "direction"],
      ["message_type=fax", "message_type"],
      ["conversation_id=abc", "conversation_id"],
      ["before_id=1&after_id=2", "before_message_id"],
      [`before_message_id=${cb.inboundId}`, "before_message_id"],
      [`after_id=${cb.inboundId}`, "after_id"]
    ]
    for (const [query, field] of cases) {
      const res = await list(a.token, query)
      assert.strictEqual(res.status, 422, query)
      assert.ok(res.body.errors?.[field], `${query} → ${JSON.stringify(res.body)}`)
    }
  })

  it("never shows another company's messages, nor those on channels an agent cannot see", async () => {
    const { a, c } = await seeded()
    const b = await createCompany(server)
    const cb = await conversationOn(server, b.token)
    const foreign = await list(a.token, `conversation_id=${cb.conversationId}`)
    assert.deepStrictEqual(foreign.body.data.items, [])
    assert.strictEqual(foreign.body.data.pagination.total, 0)
    assert.ok(!ids(await list(a.token, "perPage=100")).includes(cb.inboundId))

    const agent = await addUser(server, a.id, { role: "agent" })
    const token = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
    assert.strictEqual((await list(token, "")).body.data.pagination.total, 0, "an agent in no team sees no channel")
    const [team] = await query<{ id: number }>(server, "INSERT INTO teams (company_id, name) VALUES ($1, 'Sales') RETURNING id", [a.id])
    await query(server, "INSERT INTO team_members (company_id, team_id, user_id) VALUES ($1, $2, $3)", [a.id, team.id, agent.id])
    await query(server, "INSERT INTO team_channels (company_id, team_id, channel_id) VALUES ($1, $2, $3)", [a.id, team.id, c.channelId])
    const hidden = await createChannel(server, a.token, "msgr_b")
    const hiddenMessage = await inbound(server, a.token, hidden)
    const seen = await list(token, "perPage=100")
    assert.strictEqual(seen.body.data.pagination.total, 7)
    assert.ok(!ids(seen).includes(hiddenMessage.message_id))
    const hiddenGet = await request(server, "GET", `/v1/messages/${hiddenMessage.message_id}`, { token })
    assert.strictEqual(hiddenGet.status, 404)
    const cursor = await list(token, `before_id=${hiddenMessage.message_id}`)
    assert.strictEqual(cursor.status, 422)
    assert.strictEqual((await threadOf(server, hiddenMessage.message_id)).conversation_id, hiddenMessage.conversation_id)
  })
})

import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { seedChannel, seedConversation, seedMessage, seedTeam, seedThread, uniqueWord } from "./seed.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const search = (token: string, query: Record<string, string | number>) =>
  request(server, "GET", `/v1/messages/search?${new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)]))}`, {
    token
  })

const ids = (res: { body: any }) => res.body.data.items.map((hit: any) => hit.message_id)

/** A company with one channel and one conversation on it. */
const setup = async (contact = { display_name: "Anna Petrova" }) => {
  const company = await createCompany(server)
  const channelId = await seedChannel(server, company.id)
  const thread = await seedConversation(server, company.id, channelId, contact)
  return { company, channelId, thread }
}

describe("GET /v1/messages/search: validation", () => {
  it("answers 422 for a missing, too short (after trimming) or too long q, and accepts 2 and 255 characters", async () => {
    const { company } = await setup()
    const missing = await request(server, "GET", "/v1/messages/search", { token: company.token })
    assert.strictEqual(missing.status, 422)
    assert.deepStrictEqual(Object.keys(missing.body.errors), ["q"])
    for (const q of ["a", " a ", "   ", "x".repeat(256)]) {
      const res = await search(company.token, { q })
      assert.strictEqual(res.status, 422, JSON.stringify(q))
      assert.ok(Array.isArray(res.body.errors.q), JSON.stringify(res.body))
      assert.strictEqual(typeof res.body.message, "string")
    }
    for (const q of ["ab", "x".repeat(255), "😀😀"]) {
      const res = await search(company.token, { q })
      assert.strictEqual(res.status, 200, `${q.length} chars: ${JSON.stringify(res.body)}`)
    }
  })

  it("accepts perPage 5-100 (default 20) and answers 422 outside it, for a page out of range or a malformed conversation_id", async () => {
    const { company } = await setup()
    for (const perPage of [4, 101, 0]) {
      const res = await search(company.token, { q: "hello", perPage })
      assert.strictEqual(res.status, 422, `perPage ${perPage}`)
      assert.ok(Array.isArray(res.body.errors.perPage))
    }
    for (const page of [0, 1_000_001, 2 ** 53]) assert.strictEqual((await search(company.token, { q: "hello", page })).status, 422, `page ${page}`)
    for (const conversationId of ["x", "1.5", "99999999999999999999"]) {
      assert.strictEqual((await search(company.token, { q: "hello", conversation_id: conversationId })).status, 422, conversationId)
    }
    for (const perPage of [5, 100]) {
      const res = await search(company.token, { q: "hello", perPage })
      assert.strictEqual(res.status, 200)
      assert.strictEqual(res.body.data.pagination.perPage, perPage)
    }
    const fallback = await search(company.token, { q: "hello" })
    assert.deepStrictEqual(fallback.body.data, {
      items: [],
      pagination: { page: 1, perPage: 20, total: 0, lastPage: 1 },
      total_matches: 0
    })
  })

  it("answers 401 without credentials", async () => {
    const res = await request(server, "GET", "/v1/messages/search?q=hello")
    assert.strictEqual(res.status, 401)
  })

  it("is the search route, never a message id of /v1/messages/{message}", async () => {
    const { company } = await setup()
    const res = await search(company.token, { q: "anything" })
    assert.strictEqual(res.status, 200)
    assert.deepStrictEqual(Object.keys(res.body.data).sort(), ["items", "pagination", "total_matches"])
    const invalid = await request(server, "GET", "/v1/messages/search", { token: company.token })
    assert.strictEqual(invalid.status, 422, "a missing q is a validation error, not 'Message not found.'")
  })
})

describe("GET /v1/messages/search: results", () => {
  it("returns hits newest first with every field, paged, with total_matches", async () => {
    const { company, channelId, thread } = await setup({ display_name: "Anna Petrova" })
    const word = uniqueWord()
    const matching: Array<number> = []
    for (let i = 0; i < 7; i++) matching.push(await seedMessage(server, company.id, thread, `message ${i} about ${word}`))
    await seedMessage(server, company.id, thread, "nothing to see here")
    await seedMessage(server, company.id, thread, null)
    const newestFirst = [...matching].reverse()

    const first = await search(company.token, { q: ` ${word} `, perPage: 5 })
    assert.strictEqual(first.status, 200)
    assert.deepStrictEqual(ids(first), newestFirst.slice(0, 5))
    assert.deepStrictEqual(first.body.data.pagination, { page: 1, perPage: 5, total: 7, lastPage: 2 })
    assert.strictEqual(first.body.data.total_matches, 7)
    const [created] = await query<{ created_at: Date }>(server, "SELECT created_at FROM messages WHERE id = $1", [newestFirst[0]])
    assert.deepStrictEqual(first.body.data.items[0], {
      message_id: newestFirst[0],
      conversation_id: thread.conversationId,
      thread_id: thread.threadId,
      created_at: created.created_at.toISOString(),
      snippet: `message 6 about ${word}`,
      query: word,
      contact_name: "Anna Petrova",
      channel_id: channelId,
      channel_type: "msgr_b"
    })

    const second = await search(company.token, { q: word, perPage: 5, page: 2 })
    assert.deepStrictEqual(ids(second), newestFirst.slice(5))
    assert.deepStrictEqual(second.body.data.pagination, { page: 2, perPage: 5, total: 7, lastPage: 2 })
    const beyond = await search(company.token, { q: word, perPage: 5, page: 3 })
    assert.deepStrictEqual(ids(beyond), [])
    assert.strictEqual(beyond.body.data.total_matches, 7)
  })

  it("orders by created_at, not by id", async () => {
    const { company, thread } = await setup()
    const word = uniqueWord()
    const older = await seedMessage(server, company.id, thread, `later id ${word}`, new Date("2024-01-01T00:00:00Z"))
    const newer = await seedMessage(server, company.id, thread, `earlier id ${word}`, new Date("2024-06-01T00:00:00Z"))
    const res = await search(company.token, { q: word })
    assert.deepStrictEqual(ids(res), [newer, older])
  })

  it("matches every word of the query, case-insensitively and with Russian and English stemming", async () => {
    const { company, thread } = await setup()
    const both = await seedMessage(server, company.id, thread, "Ваш ЗАКАЗ передан в доставку")
    const one = await seedMessage(server, company.id, thread, "Заказы принимаем круглосуточно")
    const english = await seedMessage(server, company.id, thread, "Your orders were shipped yesterday")
    assert.deepStrictEqual(ids(await search(company.token, { q: "заказ" })), [one, both])
    assert.deepStrictEqual(ids(await search(company.token, { q: "заказ доставка" })), [both])
    assert.deepStrictEqual(ids(await search(company.token, { q: "Order ship" })), [english])
    assert.deepStrictEqual(ids(await search(company.token, { q: "order delivery" })), [])
  })

  it("finds nothing for a query of stop words only", async () => {
    const { company, thread } = await setup()
    await seedMessage(server, company.id, thread, "the and of to")
    const res = await search(company.token, { q: "the and" })
    assert.strictEqual(res.status, 200)
    assert.deepStrictEqual(res.body.data.total_matches, 0)
  })

  it("excludes soft-deleted messages", async () => {
    const { company, thread } = await setup()
    const word = uniqueWord()
    const kept = await seedMessage(server, company.id, thread, `kept ${word}`)
    const deleted = await seedMessage(server, company.id, thread, `deleted ${word}`)
    await query(server, "UPDATE messages SET deleted_at = now() WHERE id = $1", [deleted])
    const res = await search(company.token, { q: word })
    assert.deepStrictEqual(ids(res), [kept])
    assert.strictEqual(res.body.data.total_matches, 1)
  })

  it("builds contact_name from the display name, else first and last name, else null", async () => {
    const company = await createCompany(server)
    const channelId = await seedChannel(server, company.id, "msgr_c_business")
    const word = uniqueWord()
    const named = await seedConversation(server, company.id, channelId, { first_name: "Ivan", last_name: "Petrov" })
    const nameless = await seedConversation(server, company.id, channelId, {})
    await seedMessage(server, company.id, named, `a ${word}`)
    await seedMessage(server, company.id, nameless, `b ${word}`)
    const res = await search(company.token, { q: word })
    assert.deepStrictEqual(res.body.data.items.map((hit: any) => [hit.contact_name, hit.channel_type]), [
      [null, "msgr_c_business"],
      ["Ivan Petrov", "msgr_c_business"]
    ])
  })
})

describe("GET /v1/messages/search: snippets", () => {
  const filler = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(" ")

  it("centres a window of about 240 characters on the match with ... at cut edges", async () => {
    const { company, thread } = await setup()
    const text = `${filler(60)} needle ${filler(60)}`
    await seedMessage(server, company.id, thread, text)
    const [hit] = (await search(company.token, { q: "needle" })).body.data.items
    assert.ok(hit.snippet.startsWith("...") && hit.snippet.endsWith("..."), hit.snippet)
    const body = hit.snippet.slice(3, -3)
    assert.ok(body.length >= 200 && body.length <= 240, `${body.length}`)
    assert.ok(text.includes(body), "the window is a slice of the text")
    const at = body.indexOf("needle")
    assert.ok(Math.abs(at + 3 - (body.length - at - 9)) <= 45, `centred: ${at} of ${body.length}`)
  })

  it("has no leading ... when the match is near the start, and keeps a short text whole", async () => {
    const { company, thread } = await setup()
    const long = `The needle comes first ${filler(80)}`
    await seedMessage(server, company.id, thread, long)
    await seedMessage(server, company.id, thread, "A short needle.")
    const [short, early] = (await search(company.token, { q: "needle" })).body.data.items
    assert.strictEqual(short.snippet, "A short needle.")
    assert.ok(early.snippet.startsWith("The needle comes first"), early.snippet)
    assert.ok(early.snippet.endsWith("...") && early.snippet.length <= 243, early.snippet)
  })

  it("centres on a word of the query when the phrase is not in the text", async () => {
    const { company, thread } = await setup()
    await seedMessage(server, company.id, thread, `${filler(60)} beta ${filler(30)} alpha ${filler(40)}`)
    const [hit] = (await search(company.token, { q: "alpha beta" })).body.data.items
    assert.ok(hit.snippet.includes("beta"), hit.snippet)
    assert.ok(hit.snippet.startsWith("..."), hit.snippet)
  })

  it("is the first 240 characters when nothing matches textually (a stemmed hit)", async () => {
    const { company, thread } = await setup()
    const text = `${filler(60)} your parcel was shipped and ordered ${filler(40)}`
    await seedMessage(server, company.id, thread, text)
    const res = await search(company.token, { q: "orders" })
    assert.strictEqual(res.body.data.total_matches, 1, "orders and ordered share the stem")
    const [hit] = res.body.data.items
    assert.ok(!hit.snippet.startsWith("..."), hit.snippet)
    assert.ok(hit.snippet.endsWith("..."), hit.snippet)
    assert.ok(text.startsWith(hit.snippet.slice(0, -3)), hit.snippet)
    assert.ok(hit.snippet.length >= 220 && hit.snippet.length <= 243, `${hit.snippet.length}`)
  })
})

describe("GET /v1/messages/search: scope", () => {
  it("narrows to conversation_id, and answers 404 for another company's or a missing conversation", async () => {
    const { company, channelId, thread } = await setup()
    const other = await seedConversation(server, company.id, channelId)
    const word = uniqueWord()
    const inside = await seedMessage(server, company.id, thread, `in ${word}`)
    await seedMessage(server, company.id, other, `out ${word}`)
    const res = await search(company.token, { q: word, conversation_id: thread.conversationId })
    assert.deepStrictEqual(ids(res), [inside])
    assert.strictEqual(res.body.data.total_matches, 1)

    const foreign = await setup()
    await seedMessage(server, foreign.company.id, foreign.thread, `theirs ${word}`)
    for (const conversationId of [foreign.thread.conversationId, 987654321]) {
      const missing = await search(company.token, { q: word, conversation_id: conversationId })
      assert.strictEqual(missing.status, 404)
      assert.deepStrictEqual(missing.body, { message: "Conversation not found." })
    }
  })

  it("never shows another company's messages", async () => {
    const a = await setup()
    const b = await setup()
    const word = uniqueWord()
    await seedMessage(server, a.company.id, a.thread, `secret of a ${word}`)
    const mine = await seedMessage(server, b.company.id, b.thread, `public of b ${word}`)
    const res = await search(b.company.token, { q: word })
    assert.deepStrictEqual(ids(res), [mine])
    assert.strictEqual(res.body.data.total_matches, 1)
    const nothing = await search(b.company.token, { q: "secret" })
    assert.strictEqual(nothing.body.data.total_matches, 0)
  })

  it("limits an agent to the channels of their teams; admins and service tokens see all", async () => {
    const company = await createCompany(server)
    const seen = await seedChannel(server, company.id, "msgr_a")
    const hidden = await seedChannel(server, company.id, "msgr_b")
    const visibleThread = await seedConversation(server, company.id, seen)
    const hiddenThread = await seedConversation(server, company.id, hidden)
    // The same conversation on both channels: only its visible thread's messages count.
    const sharedOnHidden = await seedThread(server, company.id, visibleThread.conversationId, hidden)
    const word = uniqueWord()
    const a = await seedMessage(server, company.id, visibleThread, `visible ${word}`)
    const b = await seedMessage(server, company.id, hiddenThread, `hidden ${word}`)
    const c = await seedMessage(server, company.id, { ...visibleThread, threadId: sharedOnHidden, channelId: hidden }, `hidden too ${word}`)

    const agent = await addUser(server, company.id, { role: "agent" })
    const loner = await addUser(server, company.id, { role: "agent" })
    await seedTeam(server, company.id, [agent.id], [seen])
    const agentToken = (await mobileLogin(server, agent.email, agent.password)).body.data.token
    const lonerToken = (await mobileLogin(server, loner.email, loner.password)).body.data.token

    assert.deepStrictEqual(ids(await search(company.token, { q: word })), [c, b, a])
    const agentRes = await search(agentToken, { q: word })
    assert.deepStrictEqual(ids(agentRes), [a])
    assert.strictEqual(agentRes.body.data.total_matches, 1)
    assert.deepStrictEqual(ids(await search(agentToken, { q: word, conversation_id: visibleThread.conversationId })), [a])
    const notTheirs = await search(agentToken, { q: word, conversation_id: hiddenThread.conversationId })
    assert.strictEqual(notTheirs.status, 404)
    assert.strictEqual((await search(lonerToken, { q: word })).body.data.total_matches, 0)
  })
})

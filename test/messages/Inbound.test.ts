import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { afterAll, beforeAll } from "vitest"
import { Inbound } from "../../src/messages/Inbound.ts"
import type { ChannelContext, InboundMessage } from "../../src/providers/Provider.ts"
import { unique } from "../support/Ids.ts"
import { connectPusher, listen, next, subscribe } from "../support/PusherClient.ts"
import { payloadsOf, query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { type ChannelType, conversationOn, createChannel, externalIdOf, inbound, send, threadOf } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  // Read once when the app starts: the configurable part of the stop-word list.
  process.env.STOP_WORDS = "halt, Basta"
  server = await startServer()
})
afterAll(() => server?.close())

/** Ingestion as the provider adapters call it, for what the sandbox endpoint cannot express. */
const receive = async (companyId: number, channelId: number, type: ChannelType, message: Partial<InboundMessage>) => {
  const channel: ChannelContext = { id: channelId, companyId, type, provider: "sandbox", status: "connected", credentials: {}, settings: {} }
  const full: InboundMessage = {
    externalMessageId: unique("ext"),
    from: { external_id: unique("user") },
    text: null,
    messageType: "text",
    attachments: [],
    referral: null,
    thread: null,
    quotedExternalMessageId: null,
    timestamp: new Date(),
    ...message
  }
  return server.runInApp(Inbound.use((i) => i.receive(channel, full)).pipe(Effect.provide(Inbound.layer)))
}

describe("inbound ingestion", () => {
  it("creates a lead contact, its account, the conversation and the thread, with their events", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_b")
    const external = unique("tg")
    const got = await inbound(server, a.token, channel, {
      from: { external_id: external, name: "Maria Garcia Lopez", username: "maria_g", phone: "+34600111222" },
      text: "Hola"
    })
    assert.strictEqual(got.duplicate, false)
    const [contact] = await query<any>(
      server,
      `SELECT c.first_name, c.last_name, c.display_name, c.status, ca.external_id, ca.username, ca.channel_type
       FROM conversations cv JOIN contacts c ON c.id = cv.contact_id JOIN contact_accounts ca ON ca.contact_id = c.id
       WHERE cv.id = $1`,
      [got.conversation_id]
    )
    assert.deepStrictEqual(contact, {
      first_name: "Maria",
      last_name: "Garcia Lopez",
      display_name: "Maria Garcia Lopez",
      status: "lead",
      external_id: external,
      username: "maria_g",
      channel_type: "msgr_b"
    })
    const [thread] = await query<any>(server, "SELECT channel_id, is_group, last_inbound_at FROM threads WHERE conversation_id = $1", [
      got.conversation_id
    ])
    assert.strictEqual(thread.channel_id, channel)
    assert.strictEqual(thread.is_group, false)
    assert.ok(thread.last_inbound_at)

    const created = (await payloadsOf(server, a.id, "message.created")).find((p) => p.message.id === got.message_id)
    assert.strictEqual(created.type, "text")
    assert.strictEqual(created.message.type, "text")
    assert.strictEqual(created.message.direction, "inbound")
    assert.strictEqual(created.message.message_content, "Hola")
    assert.strictEqual(created.referral, null)
    assert.strictEqual((await payloadsOf(server, a.id, "conversation.created")).filter((p) => p.conversation_id === got.conversation_id).length, 1)
    assert.strictEqual((await payloadsOf(server, a.id, "contact.created")).length, 1)

    const second = await inbound(server, a.token, channel, { from: { external_id: external }, text: "again" })
    assert.strictEqual(second.conversation_id, got.conversation_id)
    assert.strictEqual((await payloadsOf(server, a.id, "conversation.created")).length, 1)
  })

  it("refreshes the account's profile from a later message, keeping what the message leaves out", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_b")
    const external = unique("tg")
    await inbound(server, a.token, channel, { from: { external_id: external, name: "Old Name", username: "old_user" }, text: "one" })
    await inbound(server, a.token, channel, { from: { external_id: external, name: "New Name" }, text: "two" })
    const account = async () =>
      (await query<any>(server, "SELECT display_name, username FROM contact_accounts WHERE company_id = $1 AND external_id = $2", [a.id, external]))[0]
    assert.deepStrictEqual(await account(), { display_name: "New Name", username: "old_user" })
    await inbound(server, a.token, channel, { from: { external_id: external }, text: "three" })
    assert.deepStrictEqual(await account(), { display_name: "New Name", username: "old_user" })
  })

  it("gives a new sender's concurrent first messages one contact, one conversation and one thread", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_b")
    const from = { external_id: unique("tg"), name: "Burst" }
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => inbound(server, a.token, channel, { from, text: `m${i}` })))
    assert.strictEqual(new Set(results.map((r) => r.conversation_id)).size, 1)
    const [counts] = await query<any>(
      server,
      `SELECT (SELECT count(*)::int FROM contact_accounts WHERE company_id = $1 AND external_id = $2) AS accounts,
         (SELECT count(*)::int FROM contacts WHERE company_id = $1) AS contacts,
         (SELECT count(*)::int FROM conversations WHERE company_id = $1) AS conversations,
         (SELECT count(*)::int FROM threads WHERE company_id = $1) AS threads,
         (SELECT count(*)::int FROM messages WHERE company_id = $1) AS messages`,
      [a.id, from.external_id]
    )
    assert.deepStrictEqual(counts, { accounts: 1, contacts: 1, conversations: 1, threads: 1, messages: 6 })
    assert.strictEqual((await payloadsOf(server, a.id, "conversation.created")).length, 1)
    assert.strictEqual((await payloadsOf(server, a.id, "contact.created")).length, 1)
  })

  it("deduplicates by the provider's message id on the channel", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_b")
    const id = unique("dup")
    const from = { external_id: unique("tg") }
    const results = await Promise.all([1, 2, 3].map(() => inbound(server, a.token, channel, { from, external_message_id: id })))
    assert.strictEqual(new Set(results.map((r) => r.message_id)).size, 1)
    assert.deepStrictEqual(results.map((r) => r.duplicate).sort(), [false, true, true])
    const [{ n }] = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM messages WHERE channel_id = $1", [channel])
    assert.strictEqual(n, 1)
    // The same provider id on another channel is another message.
    const other = await createChannel(server, a.token, "msgr_b")
    assert.strictEqual((await inbound(server, a.token, other, { from, external_message_id: id })).duplicate, false)
  })

  it("keeps the referral only on the first message of an ad-started conversation, with the channel's fields", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_a_business")
    const from = { external_id: unique("wa") }
    const ad = { source_type: "ad", source_id: "ad-1", headline: "Sale", ctwa_clid: "clid-9", media_type: "image", post_id: "p-1" }
    const first = await inbound(server, a.token, channel, { from, referral: ad })
    const later = await inbound(server, a.token, channel, { from, referral: ad })
    const message = await request(server, "GET", `/v1/messages/${first.message_id}`, { token: a.token })
    assert.deepStrictEqual(message.body.data.referral, {
      source_type: "ad",
      source_id: "ad-1",
      headline: "Sale",
      ctwa_clid: "clid-9",
      media_type: "image"
    })
    const created = (await payloadsOf(server, a.id, "message.created")).find((p) => p.message.id === first.message_id)
    assert.deepStrictEqual(created.referral, message.body.data.referral)
    assert.strictEqual((await request(server, "GET", `/v1/messages/${later.message_id}`, { token: a.token })).body.data.referral, null)

    const social = await createChannel(server, a.token, "msgr_c_business")
    const post = await inbound(server, a.token, social, {
      referral: { source_type: "post", source_id: "ad-2", post_id: "post-7", ref: "spring", ctwa_clid: "dropped" }
    })
    assert.deepStrictEqual((await request(server, "GET", `/v1/messages/${post.message_id}`, { token: a.token })).body.data.referral, {
      source_type: "post",
      source_id: "ad-2",
      post_id: "post-7",
      ref: "spring"
    })
    const telegram = await createChannel(server, a.token, "msgr_b")
    const noAds = await receive(a.id, telegram, "msgr_b", { referral: { source_type: "ad", source_id: "x" }, text: "hi" })
    assert.strictEqual((await request(server, "GET", `/v1/messages/${noAds.messageId}`, { token: a.token })).body.data.referral, null)
  })

  it("puts comments of one msgr_c_business comment thread in one group thread", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_c_business")
    const post = unique("post")
    const one = await inbound(server, a.token, channel, { thread: { external_id: post, is_group: true }, text: "first comment" })
    const two = await inbound(server, a.token, channel, { thread: { external_id: post, is_group: true }, text: "second commenter" })
    const t1 = await threadOf(server, one.message_id)
    const t2 = await threadOf(server, two.message_id)
    assert.strictEqual(t1.thread_id, t2.thread_id)
    assert.strictEqual(one.conversation_id, two.conversation_id)
    const rows = await query<{ contact_account_id: number }>(server, "SELECT contact_account_id FROM messages WHERE thread_id = $1", [t1.thread_id])
    assert.strictEqual(new Set(rows.map((r) => r.contact_account_id)).size, 2)
    const [thread] = await query<any>(server, "SELECT is_group, external_thread_id FROM threads WHERE id = $1", [t1.thread_id])
    assert.deepStrictEqual(thread, { is_group: true, external_thread_id: post })
  })

  it("opts the contact out on a stop word (the whole message, any case, and the configured ones)", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_b")
    const optedOut = async (conversationId: number) =>
      (await query<{ opted_out_at: Date | null }>(
        server,
        "SELECT c.opted_out_at FROM conversations cv JOIN contacts c ON c.id = cv.contact_id WHERE cv.id = $1",
        [conversationId]
      ))[0].opted_out_at
    for (const text of ["  STOP ", "Отписаться", "стоп", "unsubscribe", "HALT", "basta"]) {
      const got = await inbound(server, a.token, channel, { text })
      assert.ok(await optedOut(got.conversation_id), text)
    }
    for (const text of ["please stop", "stop!", "stopped"]) {
      const got = await inbound(server, a.token, channel, { text })
      assert.strictEqual(await optedOut(got.conversation_id), null, text)
    }
    const events = await payloadsOf(server, a.id, "contact.opted_out")
    assert.strictEqual(events.length, 6)
    assert.strictEqual(events[0].source, "stop_word")
  })

  it("records provider statuses for our messages and never moves read back to delivered", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const sent = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "track me" })
    const external = sent.body.data.external_message_id as string
    const status = (s: string) =>
      request(server, "POST", `/v1/channels/${c.channelId}/sandbox/status`, { token: a.token, body: { external_message_id: external, status: s } })
    assert.strictEqual((await status("read")).status, 200)
    assert.strictEqual((await status("delivered")).status, 200)
    const message = await request(server, "GET", `/v1/messages/${sent.body.data.id}`, { token: a.token })
    assert.strictEqual(message.body.data.status, "read")
    const history = await request(server, "GET", `/v1/messages/${sent.body.data.id}/statuses`, { token: a.token })
    assert.deepStrictEqual(history.body.data.map((s: any) => s.status), ["sent", "read", "delivered"])
    const updates = (await payloadsOf(server, a.id, "message.updated")).filter((p) => p.message.id === sent.body.data.id)
    assert.deepStrictEqual(updates.map((p) => p.message.status), ["read", "read"])
    const unknown = await request(server, "POST", `/v1/channels/${c.channelId}/sandbox/status`, {
      token: a.token,
      body: { external_message_id: "nobody-sent-this", status: "read" }
    })
    assert.strictEqual(unknown.status, 200)
  })

  it("stores canonical types, attachments with their provider refs, quotes, edits and reactions", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const external_id = await externalIdOf(server, c.threadId)
    const from = { external_id }
    const photo = await receive(a.id, c.channelId, "msgr_b", {
      from,
      messageType: "image",
      text: "caption",
      attachments: [{ type: "image", mime_type: "image/jpeg", url: null, provider_ref: "file-1", thumbnail_url: null, file_name: null }]
    })
    const odd = await receive(a.id, c.channelId, "msgr_b", { from, messageType: "dice", attachments: [] })
    const got = await request(server, "GET", `/v1/messages/${photo.messageId}`, { token: a.token })
    assert.strictEqual(got.body.data.message_type, "image")
    assert.strictEqual(got.body.data.attachments.length, 1)
    assert.strictEqual(got.body.data.attachments[0].type, "image")
    assert.strictEqual(got.body.data.attachments[0].mime_type, "image/jpeg")
    const [{ metadata }] = await query<any>(server, "SELECT metadata FROM messages WHERE id = $1", [photo.messageId])
    assert.deepStrictEqual(metadata.attachment_refs, ["file-1"])
    assert.strictEqual((await request(server, "GET", `/v1/messages/${odd.messageId}`, { token: a.token })).body.data.message_type, "unsupported")

    const [{ external_message_id }] = await query<any>(server, "SELECT external_message_id FROM messages WHERE id = $1", [photo.messageId])
    const quote = await receive(a.id, c.channelId, "msgr_b", { from, text: "about that", quotedExternalMessageId: external_message_id })
    assert.strictEqual((await request(server, "GET", `/v1/messages/${quote.messageId}`, { token: a.token })).body.data.quoted_message_id, photo.messageId)

    const edited = await receive(a.id, c.channelId, "msgr_b", { from, text: "new caption", externalMessageId: external_message_id, edited: true })
    assert.strictEqual(edited.messageId, photo.messageId)
    const after = await request(server, "GET", `/v1/messages/${photo.messageId}`, { token: a.token })
    assert.strictEqual(after.body.data.message_content, "new caption")
    assert.isString(after.body.data.edited_at)

    const ours = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "react to me" })
    const reacted = await receive(a.id, c.channelId, "msgr_b", {
      from,
      messageType: "reaction",
      reaction: { externalMessageId: ours.body.data.external_message_id, emoji: "🔥" }
    })
    assert.strictEqual(reacted.messageId, ours.body.data.id)
    const reactions = await request(server, "GET", `/v1/messages/${ours.body.data.id}/reactions`, { token: a.token })
    assert.deepStrictEqual(reactions.body.data.map((r: any) => [r.direction, r.reaction]), [["inbound", "🔥"]])
    await receive(a.id, c.channelId, "msgr_b", {
      from,
      messageType: "reaction",
      reaction: { externalMessageId: ours.body.data.external_message_id, emoji: null }
    })
    assert.deepStrictEqual((await request(server, "GET", `/v1/messages/${ours.body.data.id}/reactions`, { token: a.token })).body.data, [])
    const actions = (await payloadsOf(server, a.id, "message.reaction.updated")).map((p) => p.action)
    assert.deepStrictEqual(actions, ["added", "removed"])
  })

  it("sandbox inbound into another company's channel is 404", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const channel = await createChannel(server, b.token, "msgr_b")
    const res = await request(server, "POST", `/v1/channels/${channel}/sandbox/inbound`, {
      token: a.token,
      body: { from: { external_id: "x" }, text: "hi" }
    })
    assert.strictEqual(res.status, 404)
  })
})

describe("realtime", () => {
  it.live("a pusher-js client receives message.created for a sandbox inbound message", () =>
    Effect.gen(function*() {
      const a = yield* Effect.promise(() => createCompany(server))
      const channel = yield* Effect.promise(() => createChannel(server, a.token, "msgr_a_business"))
      const client = yield* connectPusher({ realtimePort: server.realtimePort, appKey: server.pusherAppKey, apiUrl: server.url, token: a.token })
      const subscription = yield* subscribe(client, `private-company.${a.id}`)
      const created = yield* listen(subscription, "message.created")
      const got = yield* Effect.promise(() =>
        inbound(server, a.token, channel, { text: "from the ad", referral: { source_type: "ad", source_id: "ad-42" } })
      )
      const event = (yield* next(created)) as any
      assert.strictEqual(event.event, "message.created")
      assert.strictEqual(event.company_id, a.id)
      assert.strictEqual(event.data.message.id, got.message_id)
      assert.strictEqual(event.data.message.type, "text")
      assert.strictEqual(event.data.message.message_content, "from the ad")
      assert.strictEqual(event.data.conversation_id, got.conversation_id)
      assert.deepStrictEqual(event.data.referral, { source_type: "ad", source_id: "ad-42" })
    }))
})

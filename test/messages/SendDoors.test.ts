import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option } from "effect"
import { afterAll, beforeAll } from "vitest"
import { CompanyId } from "../../src/auth/Domain.ts"
import { BatchRepo } from "../../src/messages/BatchRepo.ts"
import { MessagingLimit } from "../../src/messages/MessagingLimit.ts"
import { type BatchItem, Send } from "../../src/messages/Send.ts"
import { SendLane } from "../../src/messages/SendLane.ts"
import { ThreadsRepo } from "../../src/messages/ThreadsRepo.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { conversationOn, messageCount } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const withSend = <A, E>(f: (send: Send["Service"]) => Effect.Effect<A, E>) =>
  server.runInApp(Effect.gen(function*() {
    return yield* f(yield* Send)
  }).pipe(Effect.provide(Send.layer)))

const accountOf = async (threadId: number) =>
  (await query<{ contact_account_id: number }>(server, "SELECT contact_account_id FROM threads WHERE id = $1", [threadId]))[0].contact_account_id

const item = (key: number, contactAccountId: number, patch: Partial<BatchItem> = {}): BatchItem => ({
  key,
  contactAccountId,
  text: `batch ${key}`,
  attachments: [],
  metadata: { batch_key: key },
  ...patch
})

const template = {
  name: "order_ready",
  language: "en",
  header: [],
  body: [{ name: "first_name", value: "Ann" }]
}

describe("Send.many (the batch door)", () => {
  it("sends text, template and media items, refuses by rule, and stores each message once with its attachments", async () => {
    const a = await createCompany(server)
    const qr = await conversationOn(server, a.token, "msgr_a")
    const business = await conversationOn(server, a.token, "msgr_a_business")
    await query(server, "UPDATE threads SET last_inbound_at = now() - interval '30 hours' WHERE id = $1", [business.threadId])
    const qrAccount = await accountOf(qr.threadId)
    const businessAccount = await accountOf(business.threadId)
    const before = await messageCount(server, a.id)

    const [onQr, onBusiness] = await withSend((send) =>
      Effect.all([
        send.many(CompanyId.make(a.id), qr.channelId, [
          item(1, qrAccount),
          item(2, qrAccount, { text: "a photo", attachments: [{ type: "image", mime_type: "image/png", url: "https://example.com/p.png", thumbnail_url: null, storage_path: null, media_id: null, sticker_id: null, file_name: "p.png", size: null }] }),
          // An account of another channel type has no thread on this channel.
          item(3, businessAccount)
        ]),
        send.many(CompanyId.make(a.id), business.channelId, [
          item(4, businessAccount),
          item(5, businessAccount, { text: "Hello Ann", template, metadata: { template: { slug: "order_ready" } } })
        ])
      ])
    )
    assert.deepStrictEqual(onQr.map((r) => r.status), ["sent", "sent", "refused"])
    assert.deepStrictEqual(onQr[2], { key: 3, status: "refused", reason: "no_thread" })
    assert.deepStrictEqual(onBusiness[0], { key: 4, status: "refused", reason: "window_closed" })
    assert.strictEqual(onBusiness[1].status, "sent")
    assert.strictEqual(await messageCount(server, a.id), before + 3)

    const ids = [onQr[0], onQr[1], onBusiness[1]].map((r) => (r.status === "refused" ? 0 : r.messageId))
    const rows = await query<{ id: number; message_type: string; message_content: string; status: string; attachments: number; history: number }>(
      server,
      `SELECT m.id, m.message_type, m.message_content, m.status,
         (SELECT count(*)::int FROM attachments x WHERE x.message_id = m.id) AS attachments,
         (SELECT count(*)::int FROM message_statuses s WHERE s.message_id = m.id) AS history
       FROM messages m WHERE m.id = ANY($1::bigint[]) ORDER BY m.id`,
      [ids]
    )
    assert.deepStrictEqual(rows.map((r) => [r.message_type, r.message_content, r.status, r.attachments, r.history]), [
      ["text", "batch 1", "sent", 0, 1],
      ["image", "a photo", "sent", 1, 1],
      ["template", "Hello Ann", "sent", 0, 1]
    ])
    const shown = await request(server, "GET", `/v1/messages/${ids[1]}`, { token: a.token })
    assert.strictEqual(shown.status, 200)
    assert.strictEqual(shown.body.data.attachments[0].url, "https://example.com/p.png")
  })

  it("refuses another company's channel and accounts without writing anything", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const ours = await conversationOn(server, a.token)
    const theirs = await conversationOn(server, b.token)
    const before = await messageCount(server, b.id)
    // Another company's channel is no channel of ours; an account id of nobody has no thread on ours.
    const ourAccount = await accountOf(ours.threadId)
    const [onTheirChannel, nobody] = await withSend((send) =>
      Effect.all([
        send.many(CompanyId.make(a.id), theirs.channelId, [item(1, ourAccount)]),
        send.many(CompanyId.make(a.id), ours.channelId, [item(2, 0)])
      ])
    )
    assert.deepStrictEqual(onTheirChannel, [{ key: 1, status: "refused", reason: "channel_not_connected" }])
    assert.deepStrictEqual(nobody, [{ key: 2, status: "refused", reason: "no_thread" }])
    const crossAccount = await accountOf(theirs.threadId)
    const across = await withSend((send) => send.many(CompanyId.make(a.id), ours.channelId, [item(4, crossAccount)]))
    assert.deepStrictEqual(across, [{ key: 4, status: "refused", reason: "no_thread" }])
    assert.strictEqual(await messageCount(server, b.id), before)
  })

  /**
   * The decision written in docs/architecture.md (Sending): a batch is not ordered against its
   * conversations' lanes. Here a lane send is held in the lane; a batch item on the same conversation
   * goes out and is stored meanwhile.
   */
  it("does not wait for a single send held in the same conversation's lane", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const account = await accountOf(c.threadId)
    const outcome = await server.runInApp(Effect.gen(function*() {
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      // A lane of its own (fresh: the app's Send is built on the real lane).
      const heldLane = Layer.succeed(SendLane, SendLane.of({
        run: () => Deferred.succeed(entered, undefined).pipe(Effect.andThen(Deferred.await(release)), Effect.andThen(Effect.never))
      }))
      const { send, threads } = yield* Effect.gen(function*() {
        return { send: yield* Send, threads: yield* ThreadsRepo }
      }).pipe(Effect.provide(Layer.merge(Layer.fresh(Send.layerNoDeps).pipe(Layer.provide([heldLane, ThreadsRepo.layer, BatchRepo.layer, MessagingLimit.layer])), ThreadsRepo.layer)))
      const thread = Option.getOrThrow(yield* threads.threadContext(CompanyId.make(a.id), c.threadId))
      const single = yield* Effect.forkChild(send.one({
        thread,
        endpoint: "send",
        companyId: CompanyId.make(a.id),
        userId: 0,
        messageType: "text",
        text: "single",
        attachments: [],
        quotedMessageId: null,
        quotedExternalMessageId: null,
        metadata: {},
        idempotency: null
      }))
      yield* Deferred.await(entered)
      const batch = yield* send.many(CompanyId.make(a.id), c.channelId, [item(1, account)])
      const singleStillHeld = single.pollUnsafe() === undefined
      yield* Fiber.interrupt(single)
      return { batch, singleStillHeld }
    }))
    assert.isTrue(outcome.singleStillHeld)
    assert.strictEqual(outcome.batch[0].status, "sent")
    const [row] = await query<{ conversation_id: number; message_content: string }>(
      server,
      "SELECT conversation_id, message_content FROM messages WHERE id = $1",
      [outcome.batch[0].status === "refused" ? 0 : outcome.batch[0].messageId]
    )
    assert.deepStrictEqual(row, { conversation_id: c.conversationId, message_content: "batch 1" })
  })
})

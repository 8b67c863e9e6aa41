import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Layer } from "effect"
import { Entity, ShardingConfig, TestRunner } from "effect/cluster"
import { Conversation } from "../../cluster/Conversation.ts"
import { ConversationLayer } from "../../cluster/ConversationHandlers.ts"
import { CompanyId } from "../../src/auth/Domain.ts"
import type { Message } from "../../src/messages/Domain.ts"
import { Sender } from "../../src/messages/Sender.ts"
import { SendRefusal, type SendRequest } from "../../src/messages/SendLane.ts"

const request = (text: string, options: { readonly key?: string; readonly userId?: number } = {}): SendRequest => ({
  endpoint: "send",
  companyId: CompanyId.make(1),
  userId: options.userId ?? 7,
  conversationId: 42,
  threadId: 3,
  channelId: 5,
  contactAccountId: null,
  recipient: "chat-1",
  externalThreadId: null,
  messageType: "text",
  text,
  attachments: [],
  quotedMessageId: null,
  quotedExternalMessageId: null,
  metadata: {},
  idempotency: options.key === undefined ? null : { key: options.key, hash: "h" }
})

const messageFor = (req: SendRequest, id: number): Message => ({
  id,
  conversation_id: req.conversationId,
  thread_id: req.threadId,
  channel_id: req.channelId,
  direction: "outbound",
  message_type: req.messageType,
  message_content: req.text,
  external_message_id: `ext-${id}`,
  external_thread_id: null,
  status: "sent",
  sender_user_id: req.userId,
  contact_account_id: null,
  quoted_message_id: null,
  timestamp: "2026-01-01T00:00:00.000Z",
  created_at: "2026-01-01T00:00:00.000Z",
  updated_at: "2026-01-01T00:00:00.000Z",
  edited_at: null,
  deleted_at: null,
  revoked_at: null,
  can_edit_until: null,
  can_revoke_until: null,
  referral: null,
  attachments: []
})

/**
 * A Sender that logs when each send starts and ends, holds the sends whose text has a gate until
 * the test opens it, and refuses the text "mismatch" the way the real one refuses a reused key.
 */
const recordingSender = Effect.gen(function*() {
  const log: Array<string> = []
  const gates = new Map<string, Deferred.Deferred<void>>()
  const started = new Map<string, Deferred.Deferred<void>>()
  const gate = Effect.fnUntraced(function*(text: string) {
    const open = yield* Deferred.make<void>()
    const start = yield* Deferred.make<void>()
    gates.set(text, open)
    started.set(text, start)
    return { open: Deferred.succeed(open, undefined), started: Deferred.await(start) }
  })
  let next = 0
  const layer = Layer.mock(Sender, {
    execute: (req) =>
      Effect.gen(function*() {
        const text = req.text ?? ""
        log.push(`start ${text}`)
        const start = started.get(text)
        if (start !== undefined) yield* Deferred.succeed(start, undefined)
        if (text === "mismatch") return yield* SendRefusal.keyMismatch()
        if (text === "defect") return yield* Effect.die(new Error("the database rejected the statement"))
        const open = gates.get(text)
        if (open !== undefined) yield* Deferred.await(open)
        log.push(`end ${text}`)
        return messageFor(req, ++next)
      })
  })
  return { log, gate, layer }
})

const clientFor = (layer: Layer.Layer<Sender>) =>
  Entity.makeTestClient(Conversation, ConversationLayer.pipe(Layer.provide(layer))).pipe(
    Effect.provide(ShardingConfig.layer({ shardsPerGroup: 10 }))
  )

/** The entity under a real (in-memory) sharding, which restarts an entity on a fatal defect as production does. */
const shardedClient = (layer: Layer.Layer<Sender>) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(ConversationLayer.pipe(Layer.provide(layer), Layer.provideMerge(TestRunner.layer)))
    return yield* Conversation.client.pipe(Effect.provideContext(context))
  })

/** Lets every runnable fiber run until it blocks. */
const settle = Effect.repeat(Effect.yieldNow, { times: 50 })

describe("Conversation entity", () => {
  it.effect("runs the sends of one conversation one at a time, in the order they arrived", () =>
    Effect.gen(function*() {
      const sender = yield* recordingSender
      const first = yield* sender.gate("one")
      const conversation = yield* (yield* clientFor(sender.layer))("42")
      const one = yield* Effect.forkChild(conversation.Send(request("one")))
      yield* first.started
      const two = yield* Effect.forkChild(conversation.Send(request("two")))
      yield* settle
      assert.deepStrictEqual(sender.log, ["start one"], "the second send waits for the first")
      yield* first.open
      const [a, b] = [yield* Fiber.join(one), yield* Fiber.join(two)]
      assert.deepStrictEqual(sender.log, ["start one", "end one", "start two", "end two"])
      assert.strictEqual(a.message_content, "one")
      assert.strictEqual(b.message_content, "two")
      assert.isBelow(a.id, b.id)
    }).pipe(Effect.scoped))

  it.effect("does not hold one conversation's sends behind another's", () =>
    Effect.gen(function*() {
      const sender = yield* recordingSender
      const held = yield* sender.gate("held")
      const client = yield* clientFor(sender.layer)
      const blocked = yield* Effect.forkChild((yield* client("1")).Send(request("held")))
      yield* held.started
      const other = yield* (yield* client("2")).Send(request("free"))
      assert.strictEqual(other.message_content, "free")
      assert.deepStrictEqual(sender.log, ["start held", "start free", "end free"])
      yield* held.open
      yield* Fiber.join(blocked)
    }).pipe(Effect.scoped))

  it.effect("refuses a duplicate of a key still in flight at once, with the typed key_in_flight refusal", () =>
    Effect.gen(function*() {
      const sender = yield* recordingSender
      const first = yield* sender.gate("keyed")
      const conversation = yield* (yield* clientFor(sender.layer))("42")
      const original = yield* Effect.forkChild(conversation.Send(request("keyed", { key: "k-1" })))
      yield* first.started
      const duplicate = yield* Effect.exit(conversation.Send(request("keyed", { key: "k-1" })))
      assert.isTrue(Exit.isFailure(duplicate))
      const refusal = yield* conversation.Send(request("keyed", { key: "k-1" })).pipe(
        Effect.flip,
        Effect.map((e) => e._tag === "SendRefusal" ? e : null)
      )
      assert.isNotNull(refusal)
      assert.strictEqual(refusal!.reason, "key_in_flight")
      assert.strictEqual(refusal!.message, "A request with this idempotency key is still being processed.")
      assert.isUndefined(refusal!.error_code)
      // Only the original reached the Sender; the same key of another user is another request.
      assert.deepStrictEqual(sender.log, ["start keyed"])
      yield* first.open
      const sent = yield* Fiber.join(original)
      assert.strictEqual(sent.message_content, "keyed")
      const otherUser = yield* conversation.Send(request("keyed", { key: "k-1", userId: 8 }))
      assert.strictEqual(otherUser.sender_user_id, 8)
      // Once answered, the key is no longer in flight: a retry reaches the Sender (which replays it from the database).
      const retry = yield* conversation.Send(request("keyed", { key: "k-1" }))
      assert.strictEqual(retry.message_content, "keyed")
      assert.deepStrictEqual(sender.log.filter((l) => l.startsWith("start")), ["start keyed", "start keyed", "start keyed"])
    }).pipe(Effect.scoped))

  it.effect("passes the Sender's refusal through typed, by reason, with its wire error code", () =>
    Effect.gen(function*() {
      const sender = yield* recordingSender
      const conversation = yield* (yield* clientFor(sender.layer))("42")
      const reason = yield* conversation.Send(request("mismatch", { key: "k-2" })).pipe(
        Effect.as("sent"),
        Effect.catchTag("SendRefusal", (e) => Effect.succeed(`${e.reason}/${e.error_code}`))
      )
      assert.strictEqual(reason, "key_mismatch/idempotency_key_mismatch")
      // The failed send released its key: the next request with it runs.
      const next = yield* conversation.Send(request("after", { key: "k-2" }))
      assert.strictEqual(next.message_content, "after")
    }).pipe(Effect.scoped))

  it.live("answers a send that dies with its defect and goes on with the conversation's next send at once", () =>
    Effect.gen(function*() {
      const sender = yield* recordingSender
      const conversation = (yield* shardedClient(sender.layer))("42")
      const bad = yield* Effect.forkChild(Effect.exit(conversation.Send(request("defect", { key: "k-3" }))))
      yield* settle
      const good = yield* conversation.Send(request("valid", { key: "k-4" })).pipe(Effect.timeout("1 second"))
      assert.strictEqual(good.message_content, "valid")
      const failed = yield* Fiber.join(bad).pipe(Effect.timeout("1 second"))
      assert.isTrue(Exit.isFailure(failed) && Cause.hasDies(failed.cause), String(failed))
      // Not replayed: the entity did not restart, so the failed send ran once.
      assert.deepStrictEqual(sender.log, ["start defect", "start valid", "end valid"])
      // And its key was released: a retry reaches the Sender again.
      const retry = yield* Effect.exit(conversation.Send(request("defect", { key: "k-3" })))
      assert.isTrue(Exit.isFailure(retry) && Cause.hasDies(retry.cause))
    }).pipe(Effect.scoped))
})

import { Clock, Context, Effect, Exit, Layer, Option, Predicate, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Credentials } from "../providers/Credentials.ts"
import { type ChannelContext, type OutboundAttachment, type ProviderError, Providers, type SentMessage } from "../providers/Provider.ts"
import { Events } from "../events/Events.ts"
import { BlobStore } from "../platform/files/BlobStore.ts"
import { countSend } from "../platform/Metrics.ts"
import { Idempotency, type IdempotencyScope, outcomeUnknownStatus, type Recorded } from "../platform/Idempotency.ts"
import type { CompanyId } from "../auth/Domain.ts"
import { Message } from "./Domain.ts"
import { MessagesRepo, toMessage } from "./Repo.ts"
import { createdPayload, messageReference } from "./Rules.ts"
import { type OutgoingAttachment, SendRefusal, type SendRequest } from "./SendLane.ts"
import { ThreadsRepo } from "./ThreadsRepo.ts"
import { channelContext } from "../providers/Rules.ts"

/** Channel settings and credentials are read at most this often per channel by a runner's sends. */
const channelTtlMs = 2_000

const inFlight = () => Effect.fail(SendRefusal.keyInFlight())

const decodeMessage = Schema.decodeUnknownEffect(Message)

/** The message a send's key points to (what `claiming` recorded). */
const messageIdOf = (ref: unknown) =>
  Predicate.isObject(ref) && "message_id" in ref && Predicate.isNumber(ref.message_id) ? ref.message_id : null

/** The attachments as an adapter takes them: local files by absolute path, where the blob store keeps them. */
export const forProvider = (store: BlobStore["Service"], attachments: ReadonlyArray<OutgoingAttachment>) =>
  Effect.forEach(attachments, (a) =>
    Effect.map(
      a.storage_path === null ? Effect.succeed(null) : Effect.orElseSucceed(store.absolute(a.storage_path), () => null),
      (local): OutboundAttachment => ({ type: a.type, mime_type: a.mime_type, storage_path: local, url: a.url, file_name: a.file_name })
    ))

export interface ProviderOutcome {
  readonly status: SentMessage["status"]
  readonly error: string | null
  readonly externalMessageId: string | null
  readonly externalThreadId: string | null
}

/** What a provider call's exit stores: its status and ids, or `failed` with the provider's error. */
export const providerOutcome = Effect.fnUntraced(function*(
  outcome: Exit.Exit<SentMessage, Pick<ProviderError, "code" | "message">>
): Effect.fn.Return<ProviderOutcome> {
  if (Exit.isSuccess(outcome)) {
    const { status, externalMessageId, externalThreadId } = outcome.value
    return { status, error: null, externalMessageId, externalThreadId }
  }
  const error = Exit.findErrorOption(outcome)
  if (Option.isNone(error)) yield* Effect.logWarning("provider send died", outcome.cause)
  return {
    status: "failed",
    error: Option.match(error, { onNone: () => "The provider call failed.", onSome: (e) => `${e.code}: ${e.message}` }),
    externalMessageId: null,
    externalThreadId: null
  }
})

/**
 * Performs one outbound send inside its conversation's entity (so sends of a conversation are
 * ordered); `Send.one` has already applied the sending rules. The message (status `pending`) and
 * its idempotency key are written in one transaction; the provider is called after commit; a second
 * write (one statement) records the outcome (`sent`… or `failed` with the provider's error, and a history row),
 * completes the key with the answer and emits `message.created` with the final status. A provider
 * failure therefore leaves a `failed` message, never a lost one. A crash during the provider call
 * leaves a `pending` message and a pending key; once the key is abandoned (deadline plus lease) it is
 * settled, by a retry or by the sweep: `outcome_unknown` (409) while its message is still `pending`.
 *
 * One event per send, in the second write: the company's event sequence row is locked from the
 * emit to the commit, so the first transaction takes no event at all.
 */
export class Sender extends Context.Service<Sender, {
  execute(request: SendRequest): Effect.Effect<Message, SendRefusal>
}>()("crm/messages/Sender") {
  static readonly layerNoDeps = Layer.effect(
    Sender,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* MessagesRepo
      const threads = yield* ThreadsRepo
      const events = yield* Events
      const idempotency = yield* Idempotency
      const providers = yield* Providers
      const credentials = yield* Credentials
      const store = yield* BlobStore
      const channels = new Map<number, { readonly context: Option.Option<ChannelContext>; readonly at: number }>()

      const channelFor = Effect.fnUntraced(function*(companyId: CompanyId, channelId: number) {
        const now = yield* Clock.currentTimeMillis
        const cached = channels.get(channelId)
        if (cached !== undefined && now - cached.at < channelTtlMs) return cached.context
        const context = Option.map(yield* threads.channel(companyId, channelId), (row) => channelContext(credentials, companyId, row))
        if (channels.size >= 10_000) channels.clear()
        channels.set(channelId, { context, at: now })
        return context
      })

      const answer = Effect.fnUntraced(function*(companyId: CompanyId, scope: IdempotencyScope, recorded: Recorded) {
        switch (recorded._tag) {
          case "None":
            return Option.none<Message>()
          case "Replay": {
            if (recorded.status === outcomeUnknownStatus) return yield* SendRefusal.outcomeUnknown()
            const body = recorded.body
            const data = Predicate.isObject(body) && "data" in body ? body.data : undefined
            return Option.some(yield* decodeMessage(data).pipe(Effect.orDie))
          }
          case "Mismatch":
            return yield* SendRefusal.keyMismatch()
          case "InFlight": {
            const messageId = messageIdOf(recorded.ref)
            if (!recorded.abandoned || messageId === null) return yield* inFlight()
            return Option.some(yield* settle(companyId, scope, messageId))
          }
        }
      })

      /**
       * An abandoned key, from the message it points to: a message with its outcome recorded is the key's
       * answer (published now); a message still `pending` was cut off during the provider call, which may or
       * may not have delivered it, so the key answers `outcome_unknown` rather than risk a second delivery.
       */
      const settle = Effect.fnUntraced(function*(companyId: CompanyId, scope: IdempotencyScope, messageId: number) {
        const row = yield* repo.find(companyId, messageId)
        if (Option.isNone(row) || row.value.status === "pending") {
          yield* idempotency.outcomeUnknown(scope)
          return yield* SendRefusal.outcomeUnknown()
        }
        const attachments = yield* repo.attachments(companyId, [messageId])
        const message = toMessage(row.value, attachments.get(messageId) ?? [], yield* Clock.currentTimeMillis)
        yield* Effect.gen(function*() {
          yield* idempotency.complete(scope, 201, { data: message })
          yield* events.emit(companyId, "message.created", createdPayload(message))
        }).pipe(sql.withTransaction, Effect.orDie)
        return message
      })

      // Keys nobody retries are settled too, so none stays in progress past deadline plus lease (and a sweep interval).
      yield* Effect.forkScoped(
        idempotency.abandoned(100).pipe(
          Effect.flatMap(Effect.forEach((key) => {
            const messageId = messageIdOf(key.ref)
            return messageId === null
              ? idempotency.outcomeUnknown(key.scope)
              : Effect.ignore(settle(key.companyId as CompanyId, key.scope, messageId))
          }, { discard: true })),
          Effect.catchCause((cause) => Effect.logWarning("idempotency settle sweep failed", cause)),
          Effect.repeat(Schedule.spaced(Math.max(1_000, Math.floor(idempotency.abandonedAfterMs / 4))))
        )
      )

      // Uninterruptible as a whole: a caller that gives up (the request deadline) must not cut a send between
      // its first write and the provider call, which would leave its key pending with nothing under way.
      const execute = Effect.fn("Sender.execute")(function*(req: SendRequest) {
        const companyId = req.companyId
        const scope: IdempotencyScope | null = req.idempotency === null
          ? null
          : { userId: req.userId, endpoint: req.endpoint, key: req.idempotency.key }
        const hash = req.idempotency?.hash ?? ""

        // An HTTP caller looked the key up already; claiming it is what decides. A key another request
        // completed or holds meanwhile writes nothing, and is answered from its row.
        const inserted = yield* repo.insertOutbound(companyId, {
          conversationId: req.conversationId,
          threadId: req.threadId,
          channelId: req.channelId,
          direction: "outbound",
          messageType: req.messageType,
          content: req.text,
          externalMessageId: null,
          externalThreadId: req.externalThreadId,
          status: "pending",
          // User 0 is the system (a broadcast whose creator was deleted): no sender user.
          senderUserId: req.userId > 0 ? req.userId : null,
          contactAccountId: req.contactAccountId,
          quotedMessageId: req.quotedMessageId,
          referral: null,
          metadata: req.metadata,
          timestamp: null,
          attachments: req.attachments
        }, scope === null ? undefined : (messageId) => idempotency.claiming(companyId, scope, hash, sql`jsonb_build_object('message_id', ${messageId})`))
        if (Option.isNone(inserted)) {
          if (scope === null) return yield* Effect.die(new Error("an insert without a guard always writes"))
          const earlier = yield* answer(companyId, scope, yield* idempotency.lookup(scope, hash))
          if (Option.isSome(earlier)) return earlier.value
          return yield* inFlight()
        }
        const { row, attachments: stored } = inserted.value

        return yield* Effect.gen(function*() {
          const channel = yield* channelFor(companyId, req.channelId)
          const attachments = yield* forProvider(store, req.attachments)
          const outcome = Option.isNone(channel)
            ? Exit.fail({ code: "channel_missing", message: "The channel was deleted." })
            : yield* Effect.exit(
              providers.forChannel(channel.value).send(channel.value, {
                recipient: req.recipient,
                text: req.text,
                attachments,
                quotedExternalMessageId: req.quotedExternalMessageId,
                reference: messageReference(row.id),
                ...(req.template === undefined ? {} : { template: req.template })
              })
            )
          const result = yield* providerOutcome(outcome)
          // One statement, no transaction: the outcome, the key's answer and the event commit together,
          // and the company's event sequence row is held only for that statement's commit.
          const { finished, writes } = repo.finishOutbound(companyId, row, result, new Date(yield* Clock.currentTimeMillis))
          const message = toMessage(finished, stored, finished.updated_at.getTime())
          const along = scope === null ? writes : sql`${writes}, ${idempotency.completion(scope, 201, { data: message })}`
          yield* events.emit(companyId, "message.created", createdPayload(message), along)
          countSend(Option.match(channel, { onNone: () => "unknown", onSome: (c) => c.type }), result.status)
          return message
        })
      }, Effect.uninterruptible)

      return Sender.of({ execute })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide([MessagesRepo.layer, ThreadsRepo.layer, Idempotency.layer])
  )
}

import { Clock, Context, Effect, Exit, Layer, Option, Predicate, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { type SendRequest, SendRefused } from "../../cluster/Conversation.ts"
import { Credentials } from "../channels/Credentials.ts"
import { Providers } from "../channels/Provider.ts"
import { Events } from "../events/Events.ts"
import { Idempotency, type IdempotencyScope, type Recorded } from "../platform/Idempotency.ts"
import { Message } from "./Domain.ts"
import { type MessageRow, MessagesRepo, toMessage } from "./Repo.ts"
import { blockedMessage, channelContext, createdPayload, windowClosed, windowRefusal } from "./Rules.ts"

/** A key still pending this long belongs to a send whose process died between its two transactions. */
const staleAfterMs = 60_000

const refuse = (status: 404 | 409 | 422, message: string, error_code?: string) =>
  Effect.fail(new SendRefused(error_code === undefined ? { status, message } : { status, message, error_code }))

const decodeMessage = Schema.decodeUnknownEffect(Message)

/**
 * Performs one outbound send inside its conversation's entity (so sends of a conversation are
 * ordered). The message (status `pending`) and its idempotency key are written in one transaction;
 * the provider is called after commit; a second transaction records the outcome (`sent`… or `failed`
 * with the provider's error and a history row), completes the key with the answer and emits
 * `message.created` with the final status. A provider failure therefore leaves a `failed` message,
 * never a lost one; a crash during the provider call leaves a `pending` message that a retry with
 * the same key settles after a minute. One event per send: the event sequence row of the company is
 * locked from the emit to the commit, so the first transaction takes no event at all.
 */
export class Sender extends Context.Service<Sender, {
  execute(request: SendRequest): Effect.Effect<Message, SendRefused>
}>()("crm/messages/Sender") {
  static readonly layerNoDeps = Layer.effect(
    Sender,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* MessagesRepo
      const events = yield* Events
      const idempotency = yield* Idempotency
      const providers = yield* Providers
      const credentials = yield* Credentials

      const render = Effect.fnUntraced(function*(companyId: number, row: MessageRow) {
        const attachments = yield* repo.attachments(companyId, [row.id])
        return toMessage(row, attachments.get(row.id) ?? [], yield* Clock.currentTimeMillis)
      })

      const answer = Effect.fnUntraced(function*(companyId: number, scope: IdempotencyScope, recorded: Recorded) {
        switch (recorded._tag) {
          case "None":
            return Option.none<Message>()
          case "Replay": {
            const body = recorded.body
            const data = Predicate.isObject(body) && "data" in body ? body.data : undefined
            return Option.some(yield* decodeMessage(data).pipe(Effect.orDie))
          }
          case "Mismatch":
            return yield* refuse(422, "This idempotency key was already used with a different request body.", "idempotency_key_mismatch")
          case "InFlight": {
            const ref = recorded.ref
            const messageId = Predicate.isObject(ref) && "message_id" in ref && Predicate.isNumber(ref.message_id) ? ref.message_id : null
            if (recorded.ageMs < staleAfterMs || messageId === null) {
              return yield* refuse(409, "A request with this idempotency key is still being processed.")
            }
            const row = yield* repo.find(companyId, messageId)
            if (Option.isNone(row)) return yield* refuse(409, "A request with this idempotency key is still being processed.")
            // The send was cut off before its outcome was recorded; it is published now, as it stands.
            const message = yield* render(companyId, row.value)
            yield* Effect.gen(function*() {
              yield* idempotency.complete(scope, 201, { data: message })
              yield* events.emit(companyId, "message.created", createdPayload(message))
            }).pipe(sql.withTransaction, Effect.orDie)
            return Option.some(message)
          }
        }
      })

      const execute = Effect.fn("Sender.execute")(function*(req: SendRequest) {
        const companyId = req.companyId
        const scope: IdempotencyScope | null = req.idempotency === null
          ? null
          : { userId: req.userId, endpoint: req.endpoint, key: req.idempotency.key }
        const hash = req.idempotency?.hash ?? ""
        if (scope !== null) {
          const earlier = yield* answer(companyId, scope, yield* idempotency.lookup(scope, hash))
          if (Option.isSome(earlier)) return earlier.value
        }

        const found = yield* repo.threadContext(companyId, req.threadId)
        if (Option.isNone(found) || found.value.channel_deleted) return yield* refuse(404, "Thread not found.")
        const thread = found.value
        const forward = req.endpoint === "forward"
        if (thread.channel_status !== "connected") {
          return yield* refuse(422, "The channel is not connected.", "channel_not_connected")
        }
        if (thread.contact_blocked) return yield* refuse(422, blockedMessage, "contact_blocked")
        const now = yield* Clock.currentTimeMillis
        const closed = windowClosed(thread.channel_type, thread.is_group, thread.last_inbound_at, now)
        if (closed !== null) {
          const refusal = windowRefusal(thread.channel_type, closed, forward)
          return yield* refuse(422, refusal.message, refusal.error_code)
        }
        const recipient = thread.external_thread_id ?? thread.account_external_id
        if (recipient === null) return yield* refuse(422, "The thread has no recipient on the channel.", "no_recipient")

        const inserted = yield* Effect.gen(function*() {
          const created = yield* repo.insert(companyId, {
            conversationId: thread.conversation_id,
            threadId: thread.id,
            channelId: thread.channel_id,
            direction: "outbound",
            messageType: req.messageType,
            content: req.text,
            externalMessageId: null,
            externalThreadId: thread.external_thread_id,
            status: "pending",
            senderUserId: req.userId,
            contactAccountId: thread.contact_account_id,
            quotedMessageId: req.quotedMessageId,
            referral: null,
            metadata: req.metadata,
            timestamp: null,
            attachments: req.attachments
          })
          const row = created.row
          if (scope !== null) {
            // The entity orders sends within one runner's view of the shard; during a rebalance another
            // runner may hold the same key, and the key's row decides (this transaction then rolls back).
            const claimed = yield* idempotency.claim(companyId, scope, hash, { message_id: row.id })
            if (!claimed) return yield* Effect.fail(scope)
          }
          yield* repo.touchOutbound(companyId, thread.id, thread.conversation_id)
          return row
        }).pipe(
          sql.withTransaction,
          Effect.catchTag("SqlError", Effect.die),
          Effect.result
        )
        if (inserted._tag === "Failure") {
          const earlier = yield* answer(companyId, inserted.failure, yield* idempotency.lookup(inserted.failure, hash))
          if (Option.isSome(earlier)) return earlier.value
          return yield* refuse(409, "A request with this idempotency key is still being processed.")
        }
        const row = inserted.success

        return yield* Effect.gen(function*() {
          const channel = channelContext(credentials, companyId, {
            id: thread.channel_id,
            type: thread.channel_type,
            provider: thread.provider,
            status: thread.channel_status,
            credentials: thread.credentials,
            settings: thread.settings
          })
          const attachments = req.attachments.map((a) => ({
            type: a.type,
            mime_type: a.mime_type,
            storage_path: a.storage_path,
            url: a.url,
            file_name: a.file_name
          }))
          const outcome = yield* Effect.exit(
            providers.forChannel(channel).send(channel, {
              recipient,
              text: req.text,
              attachments,
              quotedExternalMessageId: req.quotedExternalMessageId
            })
          )
          const result = Exit.isSuccess(outcome)
            ? { status: outcome.value.status, error: null, externalMessageId: outcome.value.externalMessageId, externalThreadId: outcome.value.externalThreadId }
            : {
              status: "failed" as const,
              error: Option.match(Exit.findErrorOption(outcome), {
                onNone: () => "The provider call failed.",
                onSome: (e) => `${e.code}: ${e.message}`
              }),
              externalMessageId: null,
              externalThreadId: null
            }
          if (Exit.isFailure(outcome) && Option.isNone(Exit.findErrorOption(outcome))) {
            yield* Effect.logWarning("provider send died", outcome.cause)
          }
          return yield* Effect.gen(function*() {
            const updated = yield* repo.update(companyId, row.id, {
              status: result.status,
              externalMessageId: result.externalMessageId,
              externalThreadId: result.externalThreadId
            })
            yield* repo.addStatus(companyId, row.id, result.status, result.error)
            const message = yield* render(companyId, updated)
            if (scope !== null) yield* idempotency.complete(scope, 201, { data: message })
            // Last statement: the company's event sequence row stays locked only until commit.
            yield* events.emit(companyId, "message.created", createdPayload(message))
            return message
          }).pipe(sql.withTransaction, Effect.orDie)
        }).pipe(Effect.uninterruptible)
      })

      return Sender.of({ execute })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide([MessagesRepo.layer, Idempotency.layer])
  )
}

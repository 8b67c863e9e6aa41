import { Clock, Context, Effect, Layer, Option, Result } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { withLinks } from "../media/Links.ts"
import { Credentials } from "../providers/Credentials.ts"
import { Providers } from "../providers/Provider.ts"
import { channelContext, windowClosed } from "../providers/Rules.ts"
import { BlobStore } from "../platform/files/BlobStore.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import { countSend } from "../platform/Metrics.ts"
import type { Message } from "./Domain.ts"
import { type BatchMessage, BatchRepo, type BatchThread } from "./BatchRepo.ts"
import { limitOf, MessagingLimit } from "./MessagingLimit.ts"
import { type MessageRow, toMessage } from "./Repo.ts"
import { createdPayload, messageReference } from "./Rules.ts"
import { forProvider, providerOutcome } from "./Sender.ts"
import { SendLane, type OutgoingAttachment, type OutgoingTemplate, type SendRefusal, type SendRefusalReason, type SendRequest, type SendUnavailable } from "./SendLane.ts"
import { checkSend, type RuleContent } from "./SendRules.ts"
import { type ChannelRow, type ThreadContext, ThreadsRepo } from "./ThreadsRepo.ts"

/** Provider calls in flight per batch; the adapter's ceiling paces them. */
const providerConcurrency = 64

/** A single send whose target thread and content are resolved: what `Send.one` checks and sends. */
export type Delivery =
  & Omit<SendRequest, "conversationId" | "threadId" | "channelId" | "contactAccountId" | "recipient" | "externalThreadId">
  & { readonly thread: ThreadContext }

/** One send of a batch, to a contact account on the batch's channel: text, an approved template, media or a sticker. */
export interface BatchItem {
  /** The caller's id of the send (a broadcast recipient's id), echoed in its result. */
  readonly key: number
  readonly contactAccountId: number
  readonly text: string | null
  readonly attachments: ReadonlyArray<OutgoingAttachment>
  /** An approved template the provider sends instead of `text` (which keeps its rendered copy). */
  readonly template?: OutgoingTemplate | undefined
  readonly metadata: Record<string, unknown>
}

export type BatchResult =
  | {
    readonly key: number
    /** The message is stored with the provider's outcome (`failed` with its error). */
    readonly status: "sent" | "failed"
    readonly messageId: number
    readonly error: string | null
  }
  | {
    readonly key: number
    /** Nothing was sent nor stored: the sending rules refused it (`no_thread`: the account is not the channel's type). */
    readonly status: "refused"
    readonly reason: BatchRefusal
  }

/** Why a batch item was not sent: a sending rule, or `no_thread` (the account is not of the channel's type). */
export type BatchRefusal = SendRefusalReason | "no_thread"

/** A message's type from its content: a template, else its first attachment's type (a caption rides along), else text. */
export const messageTypeOf = (content: { readonly template?: unknown; readonly attachments: ReadonlyArray<{ readonly type: string }> }) =>
  content.template !== undefined ? "template" : content.attachments[0]?.type ?? "text"

const ruleContent = (content: { readonly template?: unknown; readonly attachments: ReadonlyArray<{ readonly type: string }> }): RuleContent => ({
  forward: false,
  types: content.attachments.map((a) => a.type),
  template: content.template !== undefined
})

interface Ready {
  readonly item: BatchItem
  readonly thread: BatchThread
  readonly recipient: string
}

/**
 * The one road of outbound messages: every provider send starts here, and the sending rules
 * (`checkSend`) are applied here, once per send, whichever door it takes.
 *
 * `one` sends through the thread's conversation lane (the Conversation entity, wherever it lives), which
 * orders a conversation's sends and holds idempotency keys in flight; `Sender` writes and sends it there.
 *
 * `many` sends a batch on one channel without the lanes: missing conversations and threads created in
 * one statement, the provider called concurrently under its ceiling, then the batch's messages, their
 * attachments, history rows and `message.created` events in one statement. Nothing is written per message
 * before the provider call: a caller marks its sends in flight first, and a crash between the call and the
 * final statement leaves them in flight with no message, which is how the caller tells an unknown outcome
 * (never to be resent on its own). A batch is not ordered against its conversations' lanes: a batch item and
 * a lane send of the same conversation at the same moment reach the provider in either order.
 */
export class Send extends Context.Service<Send, {
  /** Refuses by reason (`SendRefusal`) or sends through the thread's conversation lane. */
  one(delivery: Delivery): Effect.Effect<Message, SendRefusal | SendUnavailable>
  /** A result per item, in the items' order; `senderUserId` null sends as the system. */
  many(companyId: CompanyId, channelId: number, items: ReadonlyArray<BatchItem>, senderUserId?: number | null): Effect.Effect<ReadonlyArray<BatchResult>>
}>()("crm/messages/Send") {
  static readonly layerNoDeps = Layer.effect(
    Send,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const lane = yield* SendLane
      const threads = yield* ThreadsRepo
      const batches = yield* BatchRepo
      const events = yield* Events
      const providers = yield* Providers
      const credentials = yield* Credentials
      const store = yield* BlobStore
      const signed = yield* SignedUrls
      const limits = yield* MessagingLimit

      const one = Effect.fn("Send.one")(function*(request: Delivery) {
        const { thread, ...content } = request
        const forward = request.endpoint === "forward"
        const rules: RuleContent = forward ? { forward, types: [request.messageType], template: false } : ruleContent(request)
        const now = yield* Clock.currentTimeMillis
        const recipient = yield* Effect.fromResult(checkSend(thread, rules, now))
        const message = yield* lane.run({
          ...content,
          conversationId: thread.conversation_id,
          threadId: thread.id,
          channelId: thread.channel_id,
          contactAccountId: thread.contact_account_id,
          recipient,
          externalThreadId: thread.external_thread_id
        })
        // A template outside the window counts against the channel's messaging limit, which a broadcast reserves from.
        const outside = rules.template && windowClosed(thread.channel_type, thread.is_group, thread.last_inbound_at, now) !== null
        if (outside && limitOf(thread.settings) !== null && thread.contact_account_id !== null && message.status !== "failed") {
          yield* limits.record(request.companyId, thread.channel_id, thread.contact_account_id)
        }
        return message
      })

      /** The accounts' threads on the channel, created where missing; a concurrent writer may win an insert, and the next pass reads its row. */
      const threadsFor = Effect.fnUntraced(function*(companyId: CompanyId, channel: ChannelRow, accountIds: ReadonlyArray<number>) {
        let found = yield* batches.threadsOf(companyId, channel.id, accountIds)
        for (let pass = 0; pass < 3; pass++) {
          const missing = accountIds.filter((id) => !found.has(id))
          if (missing.length === 0) break
          const made = yield* Effect.gen(function*() {
            const made = yield* batches.createThreads(companyId, channel.id, channel.type, missing)
            yield* events.emitMany(companyId, made.created)
            return made.threads
          }).pipe(sql.withTransaction, Effect.orDie)
          for (const row of made) found.set(row.contact_account_id, row)
          if (accountIds.some((id) => !found.has(id))) found = yield* batches.threadsOf(companyId, channel.id, accountIds)
        }
        return found
      })

      /** Each item through the sending rules: refused, or ready with its thread and recipient. */
      const sortOut = Effect.fnUntraced(function*(companyId: CompanyId, channel: Option.Option<ChannelRow>, items: ReadonlyArray<BatchItem>) {
        const refused = new Map<number, BatchResult>()
        const ready: Array<Ready> = []
        const refuse = (item: BatchItem, reason: BatchRefusal) => refused.set(item.key, { key: item.key, status: "refused", reason })
        const connected = Option.filter(channel, (row) => row.status === "connected")
        if (Option.isNone(connected)) {
          for (const item of items) refuse(item, "channel_not_connected")
          return { refused, ready }
        }
        const found = yield* threadsFor(companyId, connected.value, [...new Set(items.map((item) => item.contactAccountId))])
        const now = yield* Clock.currentTimeMillis
        for (const item of items) {
          const thread = found.get(item.contactAccountId)
          if (thread === undefined) {
            refuse(item, "no_thread")
            continue
          }
          const verdict = checkSend(ruleThread(connected.value, thread), ruleContent(item), now)
          if (Result.isFailure(verdict)) refuse(item, verdict.failure.reason)
          else ready.push({ item, thread, recipient: verdict.success })
        }
        return { refused, ready }
      })

      /** The provider calls of the ready items, and their messages as they are stored. */
      const sendAll = Effect.fnUntraced(function*(companyId: CompanyId, channel: ChannelRow, ready: ReadonlyArray<Ready>) {
        const context = channelContext(credentials, companyId, channel)
        const adapter = providers.forChannel(context)
        const ids = yield* batches.reserveIds(ready.length, ready.reduce((n, r) => n + r.item.attachments.length, 0))
        let taken = 0
        const withIds = ready.map(({ item }) => item.attachments.map((a) => ({ ...a, id: ids.attachments[taken++] })))
        return yield* Effect.forEach(ready, ({ item, thread, recipient }, i) =>
          Effect.gen(function*() {
            const id = ids.messages[i]
            const attachments = withIds[i]
            const outcome = yield* providerOutcome(
              yield* Effect.exit(adapter.send(context, {
                recipient,
                text: item.text,
                attachments: yield* forProvider(store, item.attachments),
                quotedExternalMessageId: null,
                reference: messageReference(id),
                ...(item.template === undefined ? {} : { template: item.template })
              }))
            )
            countSend(channel.type, outcome.status)
            const row: BatchMessage = {
              id,
              conversation_id: thread.conversation_id,
              thread_id: thread.id,
              contact_account_id: item.contactAccountId,
              message_type: messageTypeOf(item),
              content: item.text,
              external_message_id: outcome.externalMessageId,
              external_thread_id: outcome.externalThreadId ?? thread.external_thread_id,
              status: outcome.status,
              error: outcome.error,
              metadata: item.metadata,
              attachments
            }
            return row
          }), { concurrency: providerConcurrency })
      })

      const many = Effect.fn("Send.many")(function*(companyId: CompanyId, channelId: number, items: ReadonlyArray<BatchItem>, senderUserId: number | null = null) {
        if (items.length === 0) return []
        const channel = yield* threads.channel(companyId, channelId)
        const { refused, ready } = yield* sortOut(companyId, channel, items)
        const stored = new Map<number, BatchResult>(refused)
        if (ready.length > 0 && Option.isSome(channel)) {
          const rows = yield* sendAll(companyId, channel.value, ready)
          ready.forEach(({ item }, i) => {
            const row = rows[i]
            stored.set(item.key, { key: item.key, status: row.status === "failed" ? "failed" : "sent", messageId: row.id, error: row.error })
          })
          const at = new Date(yield* Clock.currentTimeMillis)
          const created = rows.map((row) => ({ key: "message.created", payload: createdPayload(messageOf(companyId, channel.value, senderUserId, row, at)) }))
          yield* events.emitMany(companyId, created, batches.storing(companyId, channelId, senderUserId, rows, at))
        }
        return items.map((item) => stored.get(item.key)!)
      })

      const messageOf = (companyId: CompanyId, channel: ChannelRow, senderUserId: number | null, row: BatchMessage, at: Date): Message => {
        const stored: MessageRow = {
          id: row.id,
          company_id: companyId,
          conversation_id: row.conversation_id,
          thread_id: row.thread_id,
          channel_id: channel.id,
          channel_type: channel.type,
          direction: "outbound",
          message_type: row.message_type,
          message_content: row.content,
          external_message_id: row.external_message_id,
          external_thread_id: row.external_thread_id,
          status: row.status,
          sender_user_id: senderUserId,
          contact_account_id: row.contact_account_id,
          quoted_message_id: null,
          referral: null,
          metadata: row.metadata,
          timestamp: at,
          created_at: at,
          updated_at: at,
          edited_at: null,
          deleted_at: null,
          revoked_at: null
        }
        return toMessage(stored, row.attachments.map((a) => withLinks(signed, companyId, row.id, a)), at.getTime())
      }

      return Send.of({ one, many })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([ThreadsRepo.layer, BatchRepo.layer, MessagingLimit.layer]))
}

/** A batch's thread as the sending rules read it: one-to-one, on the batch's channel. */
const ruleThread = (channel: ChannelRow, thread: BatchThread) => ({
  channel_type: channel.type,
  channel_status: channel.status,
  is_group: false,
  contact_blocked: thread.contact_blocked,
  last_inbound_at: thread.last_inbound_at,
  external_thread_id: thread.external_thread_id,
  account_external_id: thread.account_external_id
})

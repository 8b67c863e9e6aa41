import { Clock, Context, Effect, Exit, Layer, Option } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { Credentials } from "../providers/Credentials.ts"
import { Providers } from "../providers/Provider.ts"
import { channelContext, windowClosed } from "../providers/Rules.ts"
import { type MessageRow, toMessage } from "./Repo.ts"
import { createdPayload } from "./Rules.ts"
import type { SendRefusalReason } from "./SendLane.ts"
import { ThreadsRepo } from "./ThreadsRepo.ts"
import { idArray } from "../platform/Sql.ts"

/** Provider calls in flight per batch; the adapter's ceiling paces them. */
const providerConcurrency = 64

/** One text send of a batch, to a contact account on the batch's channel. */
export interface BatchItem {
  /** The caller's id of the send (a broadcast recipient's id), echoed in its result. */
  readonly key: number
  readonly contactAccountId: number
  readonly text: string
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
    readonly reason: SendRefusalReason | "no_thread"
  }

const threadRow = (row: ThreadRow): ThreadRow => ({
  ...row,
  id: Number(row.id),
  conversation_id: Number(row.conversation_id),
  contact_account_id: Number(row.contact_account_id)
})

interface ThreadRow {
  readonly id: number
  readonly conversation_id: number
  readonly contact_account_id: number
  readonly account_external_id: string | null
  readonly external_thread_id: string | null
  readonly last_inbound_at: Date | null
  readonly contact_blocked: boolean
}

/**
 * Text sends in batches, for senders that address many contacts at once (broadcast runs): the
 * sending rules of `Outbound.deliver` for text on a one-to-one thread (channel connected, contact
 * not blocked, the customer-service window, a recipient), missing conversations and threads created
 * in one statement, the provider called concurrently under its ceiling, then the batch's messages,
 * their history rows, their `message.created` events and the caller's own writes (`settle`) in one
 * statement. Nothing is written per message before the provider call: the caller marks its sends
 * in flight first, and a crash between the call and the final statement leaves them in flight
 * with no message, which is how the caller tells an unknown outcome (never to be resent on its own).
 * The sends do not pass through their conversations' lanes: a batch is not ordered against a
 * conversation's other sends.
 *
 * The batch's statements reach rows by their keys and check the company with `IS NOT DISTINCT
 * FROM`, which no index serves. A plain `company_id = $1` offers the planner the company's indexes,
 * and while a run creates a company's conversations, threads and messages faster than autovacuum
 * analyses them, the statistics say the company has a handful: each batch then scanned all the
 * company's rows instead of probing its own (a 30k-recipient run at 470/s, against 1,660/s with
 * fresh statistics). Keyed this way, the plan is the same whatever the statistics say; and each
 * statement is planned for its own batch (unprepared), never from a generic plan cached while the
 * tables were small.
 */
export class BatchOutbound extends Context.Service<BatchOutbound, {
  deliver(
    companyId: CompanyId,
    channelId: number,
    senderUserId: number | null,
    items: ReadonlyArray<BatchItem>,
    settle: (results: ReadonlyArray<BatchResult>) => Statement.Fragment | undefined
  ): Effect.Effect<ReadonlyArray<BatchResult>>
}>()("crm/messages/BatchOutbound") {
  static readonly layerNoDeps = Layer.effect(
    BatchOutbound,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const threads = yield* ThreadsRepo
      const events = yield* Events
      const providers = yield* Providers
      const credentials = yield* Credentials

      /** Conversations and threads of the accounts that have none on the channel, and their `conversation.created` events. */
      const ensureThreads = (companyId: CompanyId, channelId: number, channelType: string, accountIds: ReadonlyArray<number>) =>
        Effect.gen(function*() {
          const accounts = sql`
            ca.id = ANY(${idArray(accountIds)}::bigint[]) AND ca.company_id IS NOT DISTINCT FROM ${companyId}::bigint
              AND ca.channel_type = ${channelType}`
          // Two statements, so that the threads' join sees the conversations just created: a single
          // statement must join its own RETURNING rows, which the planner cannot estimate.
          const conversations = yield* sql<{ id: number; contact_id: number }>`
            INSERT INTO conversations (company_id, contact_id)
            SELECT DISTINCT ca.company_id, ca.contact_id FROM contact_accounts ca WHERE ${accounts}
            ON CONFLICT (company_id, contact_id) DO NOTHING
            RETURNING id, contact_id`.unprepared
          // An account that got its thread since the caller looked is skipped here: the caller reads it next.
          const threads = yield* sql<ThreadRow>`
            WITH nt AS (
              INSERT INTO threads (company_id, conversation_id, channel_id, contact_account_id, external_thread_id, is_group)
              SELECT ca.company_id, cv.id, ${channelId}::bigint, ca.id, NULL, false
              FROM contact_accounts ca JOIN conversations cv ON cv.company_id = ca.company_id AND cv.contact_id = ca.contact_id
              WHERE ${accounts}
              ON CONFLICT (channel_id, contact_account_id) WHERE NOT is_group DO NOTHING
              RETURNING id, conversation_id, contact_account_id, external_thread_id, last_inbound_at
            )
            SELECT nt.id, nt.conversation_id, nt.contact_account_id, ca.external_id AS account_external_id, nt.external_thread_id,
              nt.last_inbound_at, (ct.blocked_at IS NOT NULL) AS contact_blocked
            FROM nt JOIN contact_accounts ca ON ca.id = nt.contact_account_id JOIN contacts ct ON ct.id = ca.contact_id`.unprepared
          const threadOf = new Map(threads.map((t) => [Number(t.conversation_id), Number(t.id)]))
          const list: Array<{ key: string; payload: unknown }> = []
          for (const row of conversations) {
            const conversationId = Number(row.id)
            const threadId = threadOf.get(conversationId)
            if (threadId === undefined) continue
            list.push({
              key: "conversation.created",
              payload: {
                conversation: { id: conversationId, contact_id: Number(row.contact_id) },
                conversation_id: conversationId,
                contact_id: Number(row.contact_id),
                channel_id: channelId,
                thread_id: threadId
              }
            })
          }
          yield* events.emitMany(companyId, list)
          return threads.map(threadRow)
        }).pipe(sql.withTransaction, Effect.orDie)

      const threadsOf = (companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>) =>
        sql<ThreadRow>`
          SELECT t.id, t.conversation_id, t.contact_account_id, ca.external_id AS account_external_id, t.external_thread_id,
            t.last_inbound_at, (ct.blocked_at IS NOT NULL) AS contact_blocked
          FROM threads t
          JOIN conversations cv ON cv.id = t.conversation_id
          JOIN contacts ct ON ct.id = cv.contact_id
          LEFT JOIN contact_accounts ca ON ca.id = t.contact_account_id
          WHERE t.channel_id = ${channelId} AND t.contact_account_id = ANY(${idArray(accountIds)}::bigint[]) AND NOT t.is_group
            AND t.company_id IS NOT DISTINCT FROM ${companyId}::bigint`.unprepared.pipe(
          Effect.map((rows) => new Map(rows.map((row) => [Number(row.contact_account_id), threadRow(row)]))),
          Effect.orDie
        )

      const deliver = Effect.fn("BatchOutbound.deliver")(function*(
        companyId: CompanyId,
        channelId: number,
        senderUserId: number | null,
        items: ReadonlyArray<BatchItem>,
        settle: (results: ReadonlyArray<BatchResult>) => Statement.Fragment | undefined
      ) {
        if (items.length === 0) return []
        const refused = (key: number, reason: SendRefusalReason | "no_thread"): BatchResult => ({ key, status: "refused", reason })
        const channel = Option.filter(yield* threads.channel(companyId, channelId), (row) => row.status === "connected")
        const results = new Map<number, BatchResult>()
        const ready: Array<{ item: BatchItem; thread: ThreadRow; recipient: string }> = []
        if (Option.isNone(channel)) {
          for (const item of items) results.set(item.key, refused(item.key, "channel_not_connected"))
        } else {
          const accountIds = [...new Set(items.map((item) => item.contactAccountId))]
          let found = yield* threadsOf(companyId, channelId, accountIds)
          // A concurrent writer may win a conversation or thread insert; the next pass reads its row.
          for (let pass = 0; pass < 3; pass++) {
            const missing = accountIds.filter((id) => !found.has(id))
            if (missing.length === 0) break
            for (const row of yield* ensureThreads(companyId, channelId, channel.value.type, missing)) found.set(row.contact_account_id, row)
            if (accountIds.some((id) => !found.has(id))) found = yield* threadsOf(companyId, channelId, accountIds)
          }
          const now = yield* Clock.currentTimeMillis
          for (const item of items) {
            const thread = found.get(item.contactAccountId)
            if (thread === undefined) results.set(item.key, refused(item.key, "no_thread"))
            else if (thread.contact_blocked) results.set(item.key, refused(item.key, "contact_blocked"))
            else if (windowClosed(channel.value.type, false, thread.last_inbound_at, now) !== null) results.set(item.key, refused(item.key, "window_closed"))
            else {
              const recipient = thread.external_thread_id ?? thread.account_external_id
              if (recipient === null) results.set(item.key, refused(item.key, "no_recipient"))
              else ready.push({ item, thread, recipient })
            }
          }
        }

        const rows: Array<MessageRow> = []
        if (ready.length > 0 && Option.isSome(channel)) {
          const connected = channel.value
          const context = channelContext(credentials, companyId, connected)
          const adapter = providers.forChannel(context)
          const outcomes = yield* Effect.forEach(ready, ({ item, recipient }) =>
            Effect.exit(adapter.send(context, { recipient, text: item.text, attachments: [], quotedExternalMessageId: null })), {
            concurrency: providerConcurrency
          })
          const ids = yield* sql<{ id: string }>`
            SELECT nextval(pg_get_serial_sequence('messages', 'id'))::text AS id FROM generate_series(1, ${ready.length})`.pipe(Effect.orDie)
          for (const outcome of outcomes) {
            if (Exit.isFailure(outcome) && Option.isNone(Exit.findErrorOption(outcome))) yield* Effect.logWarning("provider send died", outcome.cause)
          }
          const at = new Date(yield* Clock.currentTimeMillis)
          ready.forEach(({ item, thread }, i) => {
            const outcome = outcomes[i]
            const ok = Exit.isSuccess(outcome) ? outcome.value : null
            const error = ok !== null ? null : Option.match(Exit.findErrorOption(outcome), {
              onNone: () => "The provider call failed.",
              onSome: (e) => `${e.code}: ${e.message}`
            })
            const row: MessageRow = {
              id: Number(ids[i].id),
              company_id: companyId,
              conversation_id: thread.conversation_id,
              thread_id: thread.id,
              channel_id: channelId,
              channel_type: connected.type,
              direction: "outbound",
              message_type: "text",
              message_content: item.text,
              external_message_id: ok?.externalMessageId ?? null,
              external_thread_id: ok?.externalThreadId ?? thread.external_thread_id,
              status: ok?.status ?? "failed",
              sender_user_id: senderUserId,
              contact_account_id: item.contactAccountId,
              quoted_message_id: null,
              referral: null,
              metadata: item.metadata,
              timestamp: at,
              created_at: at,
              updated_at: at,
              edited_at: null,
              deleted_at: null,
              revoked_at: null
            }
            rows.push(row)
            results.set(item.key, { key: item.key, status: row.status === "failed" ? "failed" : "sent", messageId: row.id, error })
          })
        }

        const ordered = items.map((item) => results.get(item.key)!)
        const own = settle(ordered)
        if (rows.length === 0) {
          if (own !== undefined) yield* sql`WITH ${own} SELECT 1`.pipe(Effect.orDie)
          return ordered
        }
        const errors = new Map(ordered.flatMap((r) => r.status === "refused" ? [] : [[r.messageId, r.error] as const]))
        const values = JSON.stringify(rows.map((r) => ({
          id: r.id,
          conversation_id: r.conversation_id,
          thread_id: r.thread_id,
          content: r.message_content,
          external_message_id: r.external_message_id,
          external_thread_id: r.external_thread_id,
          status: r.status,
          error: errors.get(r.id) ?? null,
          contact_account_id: r.contact_account_id,
          metadata: r.metadata
        })))
        const at = rows[0].created_at
        const writes = sql`
          batch_rows AS (
            SELECT * FROM jsonb_to_recordset(${values}::jsonb) AS v(id bigint, conversation_id bigint, thread_id bigint, content text,
              external_message_id text, external_thread_id text, status text, error text, contact_account_id bigint, metadata jsonb)
          ), batch_messages AS (
            INSERT INTO messages (id, company_id, conversation_id, thread_id, channel_id, direction, message_type, message_content,
              external_message_id, external_thread_id, status, sender_user_id, contact_account_id, metadata, "timestamp", created_at, updated_at)
            OVERRIDING SYSTEM VALUE
            SELECT v.id, ${companyId}, v.conversation_id, v.thread_id, ${channelId}, 'outbound', 'text', v.content, v.external_message_id,
              v.external_thread_id, v.status, ${senderUserId}::bigint, v.contact_account_id, v.metadata, ${at}, ${at}, ${at}
            FROM batch_rows v
          ), batch_history AS (
            INSERT INTO message_statuses (company_id, message_id, status, error, created_at)
            SELECT ${companyId}, v.id, v.status, v.error, ${at} FROM batch_rows v
          ), batch_touched AS (
            UPDATE conversations SET last_message_at = GREATEST(last_message_at, ${at}::timestamptz), updated_at = ${at}
            WHERE id IN (SELECT DISTINCT conversation_id FROM batch_rows) AND company_id IS NOT DISTINCT FROM ${companyId}::bigint
          )${own === undefined ? sql`` : sql`, ${own}`}`
        const nowMs = at.getTime()
        yield* events.emitMany(companyId, rows.map((row) => ({ key: "message.created", payload: createdPayload(toMessage(row, [], nowMs)) })), writes)
        return ordered
      })

      return BatchOutbound.of({ deliver })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(ThreadsRepo.layer))
}

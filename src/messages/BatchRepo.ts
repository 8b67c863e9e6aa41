import { Context, Effect, Layer } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { idArray } from "../platform/Sql.ts"
import type { OutgoingAttachment } from "./SendLane.ts"

/** A one-to-one thread of a batch's channel, as the sending rules and the batch's messages need it. */
export interface BatchThread {
  readonly id: number
  readonly conversation_id: number
  readonly contact_account_id: number
  readonly account_external_id: string | null
  readonly external_thread_id: string | null
  readonly last_inbound_at: Date | null
  readonly contact_blocked: boolean
}

/** A batch's message as it is stored, with the provider's outcome. */
export interface BatchMessage {
  readonly id: number
  readonly conversation_id: number
  readonly thread_id: number
  readonly contact_account_id: number
  readonly message_type: string
  readonly content: string | null
  readonly external_message_id: string | null
  readonly external_thread_id: string | null
  readonly status: string
  readonly error: string | null
  readonly metadata: Record<string, unknown>
  readonly attachments: ReadonlyArray<OutgoingAttachment & { readonly id: number }>
}

const threadRow = (row: BatchThread): BatchThread => ({
  ...row,
  id: Number(row.id),
  conversation_id: Number(row.conversation_id),
  contact_account_id: Number(row.contact_account_id)
})

/**
 * The statements of the batch door (`Send.many`). They reach rows by their keys and check the
 * company with `IS NOT DISTINCT FROM`, which no index serves. A plain `company_id = $1` offers the
 * planner the company's indexes, and while a run creates a company's conversations, threads and
 * messages faster than autovacuum analyses them, the statistics say the company has a handful: each
 * batch then scanned all the company's rows instead of probing its own (a 30k-recipient run at
 * 470/s, against 1,660/s with fresh statistics). Keyed this way, the plan is the same whatever the
 * statistics say; and each statement is planned for its own batch (unprepared), never from a
 * generic plan cached while the tables were small.
 */
export class BatchRepo extends Context.Service<BatchRepo, {
  /** The one-to-one threads of the accounts on the channel, by account id. */
  threadsOf(companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>): Effect.Effect<Map<number, BatchThread>>
  /**
   * Conversations and threads for accounts of the channel's type that have none on it (an account that
   * got its thread since the caller looked is skipped: the caller reads it next), and the
   * `conversation.created` payloads of the conversations created, for the caller's transaction.
   */
  createThreads(companyId: CompanyId, channelId: number, channelType: string, accountIds: ReadonlyArray<number>): Effect.Effect<{
    readonly threads: ReadonlyArray<BatchThread>
    readonly created: ReadonlyArray<{ readonly key: string; readonly payload: unknown }>
  }>
  /** Ids for `messages` messages and `attachments` attachments, taken from their sequences in one statement. */
  reserveIds(messages: number, attachments: number): Effect.Effect<{ readonly messages: ReadonlyArray<number>; readonly attachments: ReadonlyArray<number> }>
  /** The batch's messages, their attachments and history rows, and their conversations touched, as companion writes. */
  storing(companyId: CompanyId, channelId: number, senderUserId: number | null, rows: ReadonlyArray<BatchMessage>, at: Date): Statement.Fragment
}>()("crm/messages/BatchRepo") {
  static readonly layer = Layer.effect(
    BatchRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      const threadsOf = (companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>) =>
        sql<BatchThread>`
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

      const createThreads = Effect.fnUntraced(function*(companyId: CompanyId, channelId: number, channelType: string, accountIds: ReadonlyArray<number>) {
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
        const threads = yield* sql<BatchThread>`
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
        const created = conversations.flatMap((row) => {
          const conversationId = Number(row.id)
          const threadId = threadOf.get(conversationId)
          if (threadId === undefined) return []
          const contactId = Number(row.contact_id)
          return [{
            key: "conversation.created",
            payload: {
              conversation: { id: conversationId, contact_id: contactId },
              conversation_id: conversationId,
              contact_id: contactId,
              channel_id: channelId,
              thread_id: threadId
            }
          }]
        })
        return { threads: threads.map(threadRow), created }
      }, Effect.orDie)

      const reserveIds = (messages: number, attachments: number) =>
        sql<{ kind: string; id: string }>`
          SELECT 'm' AS kind, nextval(pg_get_serial_sequence('messages', 'id'))::text AS id FROM generate_series(1, ${messages})
          UNION ALL
          SELECT 'a', nextval(pg_get_serial_sequence('attachments', 'id'))::text FROM generate_series(1, ${attachments})`.pipe(
          Effect.map((rows) => ({
            messages: rows.filter((r) => r.kind === "m").map((r) => Number(r.id)),
            attachments: rows.filter((r) => r.kind === "a").map((r) => Number(r.id))
          })),
          Effect.orDie
        )

      const attachmentWrites = (companyId: CompanyId, rows: ReadonlyArray<BatchMessage>) => {
        const list = rows.flatMap((r) => r.attachments.map((a) => ({ ...a, message_id: r.id })))
        return list.length === 0 ? sql`` : sql`, batch_attachments AS (
          INSERT INTO attachments (id, company_id, message_id, type, mime_type, url, thumbnail_url, storage_path, media_id, sticker_id, file_name, size)
          OVERRIDING SYSTEM VALUE
          SELECT a.id, ${companyId}, a.message_id, a.type, a.mime_type, a.url, a.thumbnail_url, a.storage_path, a.media_id, a.sticker_id, a.file_name, a.size
          FROM jsonb_to_recordset(${JSON.stringify(list)}::jsonb) AS a(id bigint, message_id bigint, type text, mime_type text, url text,
            thumbnail_url text, storage_path text, media_id bigint, sticker_id bigint, file_name text, size bigint)
        )`
      }

      const storing = (companyId: CompanyId, channelId: number, senderUserId: number | null, rows: ReadonlyArray<BatchMessage>, at: Date) => {
        const values = JSON.stringify(rows.map(({ attachments: _, ...row }) => row))
        return sql`
          batch_rows AS (
            SELECT * FROM jsonb_to_recordset(${values}::jsonb) AS v(id bigint, conversation_id bigint, thread_id bigint, contact_account_id bigint,
              message_type text, content text, external_message_id text, external_thread_id text, status text, error text, metadata jsonb)
          ), batch_messages AS (
            INSERT INTO messages (id, company_id, conversation_id, thread_id, channel_id, direction, message_type, message_content,
              external_message_id, external_thread_id, status, sender_user_id, contact_account_id, metadata, "timestamp", created_at, updated_at)
            OVERRIDING SYSTEM VALUE
            SELECT v.id, ${companyId}, v.conversation_id, v.thread_id, ${channelId}, 'outbound', v.message_type, v.content, v.external_message_id,
              v.external_thread_id, v.status, ${senderUserId}::bigint, v.contact_account_id, v.metadata, ${at}, ${at}, ${at}
            FROM batch_rows v
          ), batch_history AS (
            INSERT INTO message_statuses (company_id, message_id, status, error, created_at)
            SELECT ${companyId}, v.id, v.status, v.error, ${at} FROM batch_rows v
          ), batch_touched AS (
            UPDATE conversations SET last_message_at = GREATEST(last_message_at, ${at}::timestamptz), updated_at = ${at}
            WHERE id IN (SELECT DISTINCT conversation_id FROM batch_rows) AND company_id IS NOT DISTINCT FROM ${companyId}::bigint
          )${attachmentWrites(companyId, rows)}`
      }

      return BatchRepo.of({ threadsOf, createThreads, reserveIds, storing })
    })
  )
}

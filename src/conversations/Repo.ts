import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { VisibleChannels } from "../auth/ChannelAccess.ts"
import type { CompanyId } from "../auth/Domain.ts"
import type { Conversation, Thread } from "./Domain.ts"

interface ConversationRow {
  readonly id: number
  readonly contact_id: number
  readonly first_name: string | null
  readonly last_name: string | null
  readonly display_name: string | null
  readonly status: string
  readonly blocked_at: Date | null
  readonly opted_out_at: Date | null
  readonly last_message_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

interface ThreadRow {
  readonly id: number
  readonly conversation_id: number
  readonly channel_id: number
  readonly channel_type: string
  readonly contact_account_id: number | null
  readonly external_thread_id: string | null
  readonly is_group: boolean
  readonly last_inbound_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

const iso = (d: Date | null) => (d === null ? null : d.toISOString())

const view = (row: ConversationRow): Conversation => ({
  id: row.id,
  contact_id: row.contact_id,
  contact: {
    id: row.contact_id,
    firstName: row.first_name,
    lastName: row.last_name,
    displayName: row.display_name,
    status: row.status,
    blocked_at: iso(row.blocked_at),
    opted_out_at: iso(row.opted_out_at)
  },
  last_message_at: iso(row.last_message_at),
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString()
})

const threadView = (row: ThreadRow): Thread => ({
  ...row,
  last_inbound_at: iso(row.last_inbound_at),
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString()
})

export class ConversationsRepo extends Context.Service<ConversationsRepo, {
  list(companyId: CompanyId, visible: VisibleChannels, page: number, perPage: number): Effect.Effect<{
    readonly items: ReadonlyArray<Conversation>
    readonly total: number
  }>
  find(companyId: CompanyId, visible: VisibleChannels, id: number): Effect.Effect<Option.Option<Conversation>>
  threads(companyId: CompanyId, visible: VisibleChannels, conversationId: number): Effect.Effect<ReadonlyArray<Thread>>
}>()("crm/conversations/ConversationsRepo") {
  static readonly layer = Layer.effect(
    ConversationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`
        cv.id, cv.contact_id, ct.first_name, ct.last_name, ct.display_name, ct.status, ct.blocked_at, ct.opted_out_at,
        cv.last_message_at, cv.created_at, cv.updated_at`

      const channelClause = (visible: VisibleChannels): Statement.Fragment =>
        visible === "all" ? sql`true` : visible.size === 0 ? sql`false` : sql`t.channel_id IN ${sql.in([...visible])}`

      // A conversation is listed when at least one of its threads is on a live channel the caller sees.
      const seen = (companyId: CompanyId, visible: VisibleChannels) =>
        sql`EXISTS (
          SELECT 1 FROM threads t JOIN channels ch ON ch.id = t.channel_id AND ch.deleted_at IS NULL
          WHERE t.company_id = ${companyId} AND t.conversation_id = cv.id AND ${channelClause(visible)})`

      const list = (companyId: CompanyId, visible: VisibleChannels, page: number, perPage: number) =>
        Effect.gen(function*() {
          const rows = yield* sql<ConversationRow>`
            SELECT ${columns} FROM conversations cv JOIN contacts ct ON ct.id = cv.contact_id
            WHERE cv.company_id = ${companyId} AND ${seen(companyId, visible)}
            ORDER BY cv.last_message_at DESC NULLS LAST, cv.id DESC
            LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`
          const [{ total }] = yield* sql<{ total: number }>`
            SELECT count(*)::int AS total FROM conversations cv
            WHERE cv.company_id = ${companyId} AND ${seen(companyId, visible)}`
          return { items: rows.map(view), total }
        }).pipe(Effect.orDie)

      const find = (companyId: CompanyId, visible: VisibleChannels, id: number) =>
        sql<ConversationRow>`
          SELECT ${columns} FROM conversations cv JOIN contacts ct ON ct.id = cv.contact_id
          WHERE cv.company_id = ${companyId} AND cv.id = ${id} AND ${seen(companyId, visible)}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), view)),
          Effect.orDie
        )

      const threads = (companyId: CompanyId, visible: VisibleChannels, conversationId: number) =>
        sql<ThreadRow>`
          SELECT t.id, t.conversation_id, t.channel_id, ch.type AS channel_type, t.contact_account_id, t.external_thread_id,
                 t.is_group, t.last_inbound_at, t.created_at, t.updated_at
          FROM threads t JOIN channels ch ON ch.id = t.channel_id AND ch.deleted_at IS NULL
          WHERE t.company_id = ${companyId} AND t.conversation_id = ${conversationId} AND ${channelClause(visible)}
          ORDER BY t.id`.pipe(Effect.map((rows) => rows.map(threadView)), Effect.orDie)

      return ConversationsRepo.of({ list, find, threads })
    })
  )
}

import { Array as Arr, Context, Effect, Layer, Option } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { type ChannelType, channelRules } from "../providers/Domain.ts"
import { withLinks } from "../media/Links.ts"
import type { NewAttachment } from "../media/Domain.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import type { VisibleChannels } from "../auth/ChannelAccess.ts"
import type { CompanyId } from "../auth/Domain.ts"
import type { Attachment, Message, Reaction, SortBy, SortDir, StatusEntry } from "./Domain.ts"

export interface MessageRow {
  readonly id: number
  readonly company_id: number
  readonly conversation_id: number
  readonly thread_id: number
  readonly channel_id: number
  readonly channel_type: ChannelType
  readonly direction: "inbound" | "outbound"
  readonly message_type: string
  readonly message_content: string | null
  readonly external_message_id: string | null
  readonly external_thread_id: string | null
  readonly status: string | null
  readonly sender_user_id: number | null
  readonly contact_account_id: number | null
  readonly quoted_message_id: number | null
  readonly referral: Record<string, unknown> | null
  readonly metadata: Record<string, unknown>
  readonly timestamp: Date
  readonly created_at: Date
  readonly updated_at: Date
  readonly edited_at: Date | null
  readonly deleted_at: Date | null
  readonly revoked_at: Date | null
}

interface AttachmentRow extends NewAttachment {
  readonly id: number
  readonly message_id: number
}





export interface NewMessage {
  readonly conversationId: number
  readonly threadId: number
  readonly channelId: number
  readonly direction: "inbound" | "outbound"
  readonly messageType: string
  readonly content: string | null
  readonly externalMessageId: string | null
  readonly externalThreadId: string | null
  readonly status: string | null
  readonly senderUserId: number | null
  readonly contactAccountId: number | null
  readonly quotedMessageId: number | null
  readonly referral: Record<string, unknown> | null
  readonly metadata: Record<string, unknown>
  readonly timestamp: Date | null
  readonly attachments: ReadonlyArray<NewAttachment>
}

export interface ListFilter {
  readonly conversationId: number | undefined
  readonly threadId: number | undefined
  readonly channelId: number | undefined
  readonly direction: "inbound" | "outbound" | undefined
  readonly messageType: string | undefined
  readonly search: string | undefined
  readonly sortBy: SortBy
  readonly sortDir: SortDir
  readonly perPage: number
  readonly page: number
  readonly cursor: { readonly kind: "before" | "after"; readonly id: number } | undefined
}


const iso = (d: Date | null) => (d === null ? null : d.toISOString())

const deadline = (base: Date, seconds: number | null, nowMs: number) => {
  if (seconds === null) return null
  const until = base.getTime() + seconds * 1000
  return until > nowMs ? new Date(until).toISOString() : null
}

/** The message object; the edit and revoke deadlines follow the spec's null rules exactly. */
export const toMessage = (row: MessageRow, attachments: ReadonlyArray<Attachment>, nowMs: number): Message => {
  const rules = channelRules[row.channel_type]
  const open = row.direction === "outbound" && row.deleted_at === null
  return {
    id: row.id,
    conversation_id: row.conversation_id,
    thread_id: row.thread_id,
    channel_id: row.channel_id,
    direction: row.direction,
    message_type: row.message_type,
    message_content: row.message_content,
    external_message_id: row.external_message_id,
    external_thread_id: row.external_thread_id,
    status: row.status,
    sender_user_id: row.sender_user_id,
    contact_account_id: row.contact_account_id,
    quoted_message_id: row.quoted_message_id,
    timestamp: row.timestamp.toISOString(),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    edited_at: iso(row.edited_at),
    deleted_at: iso(row.deleted_at),
    revoked_at: iso(row.revoked_at),
    can_edit_until: open && row.message_type === "text" ? deadline(row.created_at, rules.editWindowSeconds, nowMs) : null,
    can_revoke_until: open && rules.revoke ? deadline(row.created_at, rules.revokeWindowSeconds, nowMs) : null,
    referral: row.referral,
    attachments
  }
}

const toStatus = (row: { id: number; message_id: number; status: string; error: string | null; created_at: Date }): StatusEntry => ({
  ...row,
  created_at: row.created_at.toISOString()
})

interface ReactionRow {
  readonly id: number
  readonly message_id: number
  readonly channel_id: number
  readonly direction: "inbound" | "outbound"
  readonly reaction: string
  readonly author_user_id: number | null
  readonly author_contact_account_id: number | null
  readonly created_at: Date
  readonly updated_at: Date
}

const toReaction = (row: ReactionRow): Reaction => ({
  ...row,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString()
})

const likePattern = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

export class MessagesRepo extends Context.Service<MessagesRepo, {
  find(companyId: CompanyId, id: number): Effect.Effect<Option.Option<MessageRow>>
  findForUpdate(companyId: CompanyId, id: number): Effect.Effect<Option.Option<MessageRow>>
  findByExternal(companyId: CompanyId, channelId: number, externalMessageId: string, direction: "inbound" | "outbound" | null): Effect.Effect<Option.Option<MessageRow>>
  attachments(companyId: CompanyId, messageIds: ReadonlyArray<number>): Effect.Effect<ReadonlyMap<number, ReadonlyArray<Attachment>>>
  list(companyId: CompanyId, visible: VisibleChannels, filter: ListFilter): Effect.Effect<{ readonly rows: ReadonlyArray<MessageRow>; readonly total: number | null }>
  around(companyId: CompanyId, visible: VisibleChannels, anchor: MessageRow, limit: number): Effect.Effect<{ readonly before: ReadonlyArray<MessageRow>; readonly after: ReadonlyArray<MessageRow> }>
  insert(companyId: CompanyId, message: NewMessage): Effect.Effect<{ readonly row: MessageRow; readonly attachments: ReadonlyArray<Attachment> }>
  addAttachments(companyId: CompanyId, messageId: number, list: ReadonlyArray<NewAttachment>): Effect.Effect<ReadonlyArray<Attachment>>
  /** Records fetched bytes on an attachment that has none yet; None when another fetch got there first. */
  storeAttachmentFile(companyId: CompanyId, messageId: number, attachmentId: number, file: {
    readonly storagePath: string
    readonly mimeType: string | null
    readonly size: number
  }): Effect.Effect<Option.Option<Attachment>>
  /**
   * The message (status `pending`) and the conversation's `last_message_at` in one statement, with
   * the caller's companion write (`guard`, e.g. an idempotency claim given the new message's id as
   * a SQL expression) deciding whether anything is written: none when it does not pass.
   */
  insertOutbound(companyId: CompanyId, message: NewMessage, guard?: (messageId: Statement.Fragment) => {
    readonly writes: Statement.Fragment
    readonly passed: Statement.Fragment
  }): Effect.Effect<Option.Option<{ readonly row: MessageRow; readonly attachments: ReadonlyArray<Attachment> }>>
  /**
   * The provider's outcome (status, provider ids, the history row) as companion writes for the
   * statement that emits `message.created`, and the row as it reads once they are written.
   */
  finishOutbound(companyId: CompanyId, row: MessageRow, outcome: {
    readonly status: string
    readonly error: string | null
    readonly externalMessageId: string | null
    readonly externalThreadId: string | null
  }, now: Date): { readonly writes: Statement.Fragment; readonly finished: MessageRow }
  update(companyId: CompanyId, id: number, patch: {
    readonly content?: string | null
    readonly edited?: boolean
    readonly deleted?: boolean
    readonly revoked?: boolean
    readonly status?: string
    readonly externalMessageId?: string | null
    readonly externalThreadId?: string | null
  }): Effect.Effect<MessageRow>
  statuses(companyId: CompanyId, messageId: number): Effect.Effect<ReadonlyArray<StatusEntry>>
  addStatus(companyId: CompanyId, messageId: number, status: string, error: string | null): Effect.Effect<StatusEntry>
  reactions(companyId: CompanyId, messageId: number): Effect.Effect<ReadonlyArray<Reaction>>
  setOutboundReaction(companyId: CompanyId, messageId: number, channelId: number, input: {
    readonly reaction: string
    readonly authorUserId: number | null
    readonly authorContactAccountId: number | null
  }): Effect.Effect<{ readonly reaction: Reaction; readonly replaced: boolean }>
  removeOutboundReaction(companyId: CompanyId, messageId: number, channelId: number): Effect.Effect<Option.Option<Reaction>>
  setInboundReaction(companyId: CompanyId, messageId: number, channelId: number, accountId: number, reaction: string | null): Effect.Effect<{ readonly removed: boolean; readonly reaction: Reaction | null }>
  optOut(companyId: CompanyId, contactId: number): Effect.Effect<Option.Option<Date>>
  isMember(companyId: CompanyId, userId: number): Effect.Effect<boolean>
  /** Serializes writers of one (channel, external id) for the rest of the transaction. */
  lockExternal(companyId: CompanyId, channelId: number, externalId: string): Effect.Effect<void>
}>()("crm/messages/MessagesRepo") {
  static readonly layer = Layer.effect(
    MessagesRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const signed = yield* SignedUrls
      const toAttachment = (companyId: CompanyId) => ({ message_id, ...row }: AttachmentRow): Attachment =>
        withLinks(signed, companyId, message_id, row)
      const columns = sql`
        m.id, m.company_id, m.conversation_id, m.thread_id, m.channel_id, ch.type AS channel_type, m.direction,
        m.message_type, m.message_content, m.external_message_id, m.external_thread_id, m.status, m.sender_user_id,
        m.contact_account_id, m.quoted_message_id, m.referral, m.metadata, m."timestamp", m.created_at, m.updated_at,
        m.edited_at, m.deleted_at, m.revoked_at`
      const from = sql`messages m JOIN channels ch ON ch.id = m.channel_id`

      const visibleClause = (visible: VisibleChannels, column: string): Statement.Fragment | undefined => {
        if (visible === "all") return undefined
        return visible.size === 0 ? sql`false` : sql`${sql.literal(column)} IN ${sql.in([...visible])}`
      }

      const first = <A>(rows: ReadonlyArray<A>) => Option.fromNullishOr(rows[0])

      const find = (companyId: CompanyId, id: number) =>
        sql<MessageRow>`SELECT ${columns} FROM ${from} WHERE m.company_id = ${companyId} AND m.id = ${id}`.pipe(
          Effect.map(first),
          Effect.orDie
        )

      const findForUpdate = (companyId: CompanyId, id: number) =>
        sql<MessageRow>`SELECT ${columns} FROM ${from} WHERE m.company_id = ${companyId} AND m.id = ${id} FOR UPDATE OF m`.pipe(
          Effect.map(first),
          Effect.orDie
        )

      const findByExternal = (companyId: CompanyId, channelId: number, externalId: string, direction: "inbound" | "outbound" | null) =>
        sql<MessageRow>`
          SELECT ${columns} FROM ${from}
          WHERE m.channel_id = ${channelId} AND m.external_message_id = ${externalId} AND m.company_id = ${companyId}
            ${direction === null ? sql`` : sql`AND m.direction = ${direction}`}
          ORDER BY m.id LIMIT 1`.pipe(Effect.map(first), Effect.orDie)

      const attachments = (companyId: CompanyId, ids: ReadonlyArray<number>) =>
        ids.length === 0
          ? Effect.succeed(new Map<number, ReadonlyArray<Attachment>>())
          : sql<AttachmentRow>`
              SELECT id, message_id, type, mime_type, url, thumbnail_url, storage_path, media_id, sticker_id, file_name, size
              FROM attachments WHERE company_id = ${companyId} AND message_id IN ${sql.in(ids)} ORDER BY id`.pipe(
              Effect.map((rows) => {
                const byMessage = new Map<number, Array<Attachment>>()
                for (const row of rows) {
                  const list = byMessage.get(row.message_id) ?? []
                  list.push(toAttachment(companyId)(row))
                  byMessage.set(row.message_id, list)
                }
                return byMessage as ReadonlyMap<number, ReadonlyArray<Attachment>>
              }),
              Effect.orDie
            )

      const sortColumn: Record<SortBy, string> = {
        id: "m.id",
        timestamp: "m.\"timestamp\"",
        created_at: "m.created_at",
        updated_at: "m.updated_at"
      }

      const list = (companyId: CompanyId, visible: VisibleChannels, f: ListFilter) =>
        Effect.gen(function*() {
          const clauses: Array<Statement.Fragment> = [sql`m.company_id = ${companyId}`]
          const vis = visibleClause(visible, "m.channel_id")
          if (vis !== undefined) clauses.push(vis)
          if (f.conversationId !== undefined) clauses.push(sql`m.conversation_id = ${f.conversationId}`)
          if (f.threadId !== undefined) clauses.push(sql`m.thread_id = ${f.threadId}`)
          if (f.channelId !== undefined) clauses.push(sql`m.channel_id = ${f.channelId}`)
          if (f.direction !== undefined) clauses.push(sql`m.direction = ${f.direction}`)
          if (f.messageType !== undefined) clauses.push(sql`m.message_type = ${f.messageType}`)
          if (f.search !== undefined) clauses.push(sql`m.message_content ILIKE ${likePattern(f.search)}`)
          const col = sql.literal(sortColumn[f.sortBy])
          const cursorColumn = sql.literal(`c.${sortColumn[f.sortBy].slice(2)}`)
          if (f.cursor === undefined) {
            const dir = sql.literal(f.sortDir === "asc" ? "ASC" : "DESC")
            const where = sql.and(clauses)
            const [rows, counted] = yield* Effect.all([
              sql<MessageRow>`
                SELECT ${columns} FROM ${from} WHERE ${where}
                ORDER BY ${col} ${dir}, m.id ${dir}
                LIMIT ${f.perPage} OFFSET ${(f.page - 1) * f.perPage}`,
              sql<{ total: number }>`SELECT count(*)::int AS total FROM messages m WHERE ${where}`
            ], { concurrency: 1 })
            return { rows, total: counted[0].total }
          }
          const older = f.cursor.kind === "before"
          const op = sql.literal(older ? "<" : ">")
          clauses.push(
            f.sortBy === "id"
              ? sql`m.id ${op} ${f.cursor.id}`
              : sql`(${col}, m.id) ${op} (SELECT ${cursorColumn}, c.id FROM messages c WHERE c.company_id = ${companyId} AND c.id = ${f.cursor.id})`
          )
          // Walk away from the cursor so the nearest messages are the ones kept; the caller's
          // order is applied afterwards.
          const walk = sql.literal(older ? "DESC" : "ASC")
          const rows = yield* sql<MessageRow>`
            SELECT ${columns} FROM ${from} WHERE ${sql.and(clauses)}
            ORDER BY ${col} ${walk}, m.id ${walk} LIMIT ${f.perPage}`
          const wantDesc = f.sortDir === "desc"
          return { rows: older === wantDesc ? rows : [...rows].reverse(), total: null }
        }).pipe(Effect.orDie)

      const around = (companyId: CompanyId, visible: VisibleChannels, anchor: MessageRow, limit: number) =>
        Effect.gen(function*() {
          const vis = visibleClause(visible, "m.channel_id")
          const base = sql`m.company_id = ${companyId} AND m.conversation_id = ${anchor.conversation_id} ${
            vis === undefined ? sql`` : sql`AND ${vis}`
          }`
          const pivot = sql`(SELECT a."timestamp", a.id FROM messages a WHERE a.company_id = ${companyId} AND a.id = ${anchor.id})`
          const [before, after] = yield* Effect.all([
            sql<MessageRow>`
              SELECT ${columns} FROM ${from} WHERE ${base} AND (m."timestamp", m.id) < ${pivot}
              ORDER BY m."timestamp" DESC, m.id DESC LIMIT ${limit + 1}`,
            sql<MessageRow>`
              SELECT ${columns} FROM ${from} WHERE ${base} AND (m."timestamp", m.id) > ${pivot}
              ORDER BY m."timestamp" ASC, m.id ASC LIMIT ${limit + 1}`
          ], { concurrency: 1 })
          return { before, after }
        }).pipe(Effect.orDie)

      const insert = (companyId: CompanyId, m: NewMessage) =>
        Effect.gen(function*() {
          const [row] = yield* sql<MessageRow>`
            WITH m AS (
              INSERT INTO messages (
                company_id, conversation_id, thread_id, channel_id, direction, message_type, message_content,
                external_message_id, external_thread_id, status, sender_user_id, contact_account_id, quoted_message_id,
                referral, metadata, "timestamp"
              ) VALUES (
                ${companyId}, ${m.conversationId}, ${m.threadId}, ${m.channelId}, ${m.direction}, ${m.messageType}, ${m.content},
                ${m.externalMessageId}, ${m.externalThreadId}, ${m.status}, ${m.senderUserId}, ${m.contactAccountId},
                ${m.quotedMessageId}, ${m.referral === null ? null : JSON.stringify(m.referral)}::jsonb,
                ${JSON.stringify(m.metadata)}::jsonb, COALESCE(${m.timestamp}::timestamptz, now())
              ) RETURNING *
            )
            SELECT ${columns} FROM m JOIN channels ch ON ch.id = m.channel_id`
          return { row, attachments: yield* insertAttachments(companyId, row.id, m.attachments) }
        }).pipe(Effect.orDie)

      const insertAttachments = (companyId: CompanyId, messageId: number, list: ReadonlyArray<NewAttachment>) =>
        !Arr.isReadonlyArrayNonEmpty(list)
          ? Effect.succeed([] as ReadonlyArray<Attachment>)
          : sql<AttachmentRow>`INSERT INTO attachments ${
            sql.insert(Arr.map(list, (a) => ({
              company_id: companyId,
              message_id: messageId,
              type: a.type,
              mime_type: a.mime_type,
              url: a.url,
              thumbnail_url: a.thumbnail_url,
              storage_path: a.storage_path,
              media_id: a.media_id,
              sticker_id: a.sticker_id,
              file_name: a.file_name,
              size: a.size
            })))
          } RETURNING id, message_id, type, mime_type, url, thumbnail_url, storage_path, media_id, sticker_id, file_name, size`.pipe(
            Effect.map((rows) => rows.map(toAttachment(companyId)))
          )

      const insertOutbound: MessagesRepo["Service"]["insertOutbound"] = (companyId, m, guard) => {
        // The id is taken first so that the guard can record it in the same statement.
        const condition = guard?.(sql`(SELECT id FROM new_message)`)
        const write = Effect.gen(function*() {
          const [row] = yield* sql<MessageRow>`
            WITH new_message AS (
              SELECT nextval(pg_get_serial_sequence('messages', 'id')) AS id
            ), ${condition === undefined ? sql`` : sql`${condition.writes},`} m AS (
              INSERT INTO messages (
                id, company_id, conversation_id, thread_id, channel_id, direction, message_type, message_content,
                external_thread_id, status, sender_user_id, contact_account_id, quoted_message_id, metadata
              ) OVERRIDING SYSTEM VALUE
              SELECT new_message.id, ${companyId}, ${m.conversationId}, ${m.threadId}, ${m.channelId}, 'outbound', ${m.messageType},
                ${m.content}, ${m.externalThreadId}, ${m.status}, ${m.senderUserId}, ${m.contactAccountId}, ${m.quotedMessageId},
                ${JSON.stringify(m.metadata)}::jsonb
              FROM new_message ${condition === undefined ? sql`` : sql`WHERE ${condition.passed}`}
              RETURNING *
            ), touched AS (
              UPDATE conversations SET last_message_at = GREATEST(last_message_at, now()), updated_at = now()
              WHERE company_id = ${companyId} AND id = ${m.conversationId} AND EXISTS (SELECT 1 FROM m)
            )
            SELECT ${columns} FROM m JOIN channels ch ON ch.id = m.channel_id`
          if (row === undefined) return Option.none()
          return Option.some({ row, attachments: yield* insertAttachments(companyId, row.id, m.attachments) })
        })
        // Without attachments the one statement is atomic by itself.
        return (m.attachments.length === 0 ? write : sql.withTransaction(write)).pipe(Effect.orDie)
      }

      const addAttachments = (companyId: CompanyId, messageId: number, list: ReadonlyArray<NewAttachment>) =>
        insertAttachments(companyId, messageId, list).pipe(Effect.orDie)

      const storeAttachmentFile: MessagesRepo["Service"]["storeAttachmentFile"] = (companyId, messageId, attachmentId, file) =>
        sql<AttachmentRow>`
          UPDATE attachments SET storage_path = ${file.storagePath}, mime_type = COALESCE(mime_type, ${file.mimeType}), size = ${file.size}
          WHERE company_id = ${companyId} AND message_id = ${messageId} AND id = ${attachmentId} AND storage_path IS NULL
          RETURNING id, message_id, type, mime_type, url, thumbnail_url, storage_path, media_id, sticker_id, file_name, size`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toAttachment(companyId))),
          Effect.orDie
        )

      const finishOutbound: MessagesRepo["Service"]["finishOutbound"] = (companyId, row, o, now) => ({
        writes: sql`
          finished AS (
            UPDATE messages SET
              status = ${o.status},
              external_message_id = ${o.externalMessageId},
              external_thread_id = COALESCE(${o.externalThreadId}, external_thread_id),
              updated_at = ${now}
            WHERE company_id = ${companyId} AND id = ${row.id}
          ), finished_history AS (
            INSERT INTO message_statuses (company_id, message_id, status, error, created_at)
            VALUES (${companyId}, ${row.id}, ${o.status}, ${o.error}, ${now})
          )`,
        finished: {
          ...row,
          status: o.status,
          external_message_id: o.externalMessageId,
          external_thread_id: o.externalThreadId ?? row.external_thread_id,
          updated_at: now
        }
      })

      const update: MessagesRepo["Service"]["update"] = (companyId, id, p) =>
        sql<MessageRow>`
          WITH m AS (
            UPDATE messages SET
              message_content = ${p.content !== undefined ? sql`${p.content}` : sql`message_content`},
              edited_at = ${p.edited === true ? sql`now()` : sql`edited_at`},
              deleted_at = ${p.deleted === true ? sql`COALESCE(deleted_at, now())` : sql`deleted_at`},
              revoked_at = ${p.revoked === true ? sql`COALESCE(revoked_at, now())` : sql`revoked_at`},
              status = ${p.status !== undefined ? sql`${p.status}` : sql`status`},
              external_message_id = ${p.externalMessageId !== undefined ? sql`${p.externalMessageId}` : sql`external_message_id`},
              external_thread_id = ${p.externalThreadId !== undefined ? sql`COALESCE(${p.externalThreadId}, external_thread_id)` : sql`external_thread_id`},
              updated_at = now()
            WHERE company_id = ${companyId} AND id = ${id}
            RETURNING *
          )
          SELECT ${columns} FROM m JOIN channels ch ON ch.id = m.channel_id`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const statuses = (companyId: CompanyId, messageId: number) =>
        sql<{ id: number; message_id: number; status: string; error: string | null; created_at: Date }>`
          SELECT id, message_id, status, error, created_at FROM message_statuses
          WHERE company_id = ${companyId} AND message_id = ${messageId} ORDER BY id`.pipe(
          Effect.map((rows) => rows.map(toStatus)),
          Effect.orDie
        )

      const addStatus = (companyId: CompanyId, messageId: number, status: string, error: string | null) =>
        sql<{ id: number; message_id: number; status: string; error: string | null; created_at: Date }>`
          INSERT INTO message_statuses (company_id, message_id, status, error)
          VALUES (${companyId}, ${messageId}, ${status}, ${error})
          RETURNING id, message_id, status, error, created_at`.pipe(
          Effect.map((rows) => toStatus(rows[0])),
          Effect.orDie
        )

      const reactionColumns = sql`id, message_id, channel_id, direction, reaction, author_user_id, author_contact_account_id, created_at, updated_at`

      const reactions = (companyId: CompanyId, messageId: number) =>
        sql<ReactionRow>`
          SELECT ${reactionColumns} FROM message_reactions
          WHERE company_id = ${companyId} AND message_id = ${messageId} ORDER BY id`.pipe(
          Effect.map((rows) => rows.map(toReaction)),
          Effect.orDie
        )

      const setOutboundReaction: MessagesRepo["Service"]["setOutboundReaction"] = (companyId, messageId, channelId, input) =>
        sql<ReactionRow & { inserted: boolean }>`
          INSERT INTO message_reactions (company_id, message_id, channel_id, direction, reaction, author_user_id, author_contact_account_id)
          VALUES (${companyId}, ${messageId}, ${channelId}, 'outbound', ${input.reaction}, ${input.authorUserId}, ${input.authorContactAccountId})
          ON CONFLICT (message_id, channel_id) WHERE direction = 'outbound' DO UPDATE SET
            reaction = EXCLUDED.reaction,
            author_user_id = EXCLUDED.author_user_id,
            author_contact_account_id = EXCLUDED.author_contact_account_id,
            updated_at = now()
          RETURNING ${reactionColumns}, (xmax = 0) AS inserted`.pipe(
          Effect.map(([{ inserted, ...row }]) => ({ reaction: toReaction(row), replaced: !inserted })),
          Effect.orDie
        )

      const removeOutboundReaction = (companyId: CompanyId, messageId: number, channelId: number) =>
        sql<ReactionRow>`
          DELETE FROM message_reactions
          WHERE company_id = ${companyId} AND message_id = ${messageId} AND channel_id = ${channelId} AND direction = 'outbound'
          RETURNING ${reactionColumns}`.pipe(
          Effect.map((rows) => Option.map(first(rows), toReaction)),
          Effect.orDie
        )

      const setInboundReaction = (companyId: CompanyId, messageId: number, channelId: number, accountId: number, reaction: string | null) =>
        Effect.gen(function*() {
          const removed = yield* sql`
            DELETE FROM message_reactions
            WHERE company_id = ${companyId} AND message_id = ${messageId} AND direction = 'inbound'
              AND author_contact_account_id = ${accountId}
            RETURNING id`
          if (reaction === null) return { removed: removed.length > 0, reaction: null }
          const [row] = yield* sql<ReactionRow>`
            INSERT INTO message_reactions (company_id, message_id, channel_id, direction, reaction, author_contact_account_id)
            VALUES (${companyId}, ${messageId}, ${channelId}, 'inbound', ${reaction}, ${accountId})
            RETURNING ${reactionColumns}`
          return { removed: false, reaction: toReaction(row) }
        }).pipe(Effect.orDie)

      const optOut = (companyId: CompanyId, contactId: number) =>
        sql<{ opted_out_at: Date }>`
          UPDATE contacts SET opted_out_at = now(), updated_at = now()
          WHERE company_id = ${companyId} AND id = ${contactId} AND opted_out_at IS NULL
          RETURNING opted_out_at`.pipe(Effect.map((rows) => Option.map(first(rows), (r) => r.opted_out_at)), Effect.orDie)

      const isMember = (companyId: CompanyId, userId: number) =>
        sql<{ found: boolean }>`
          SELECT EXISTS (SELECT 1 FROM memberships WHERE company_id = ${companyId} AND user_id = ${userId}) AS found`.pipe(
          Effect.map((rows) => rows[0].found),
          Effect.orDie
        )

      const lockExternal = (companyId: CompanyId, channelId: number, externalId: string) =>
        sql`SELECT pg_advisory_xact_lock(${channelId}::int, hashtext(${`${companyId}:${externalId}`}))`.pipe(Effect.asVoid, Effect.orDie)

      return MessagesRepo.of({
        find,
        findForUpdate,
        findByExternal,
        attachments,
        list,
        around,
        insert,
        insertOutbound,
        addAttachments,
        storeAttachmentFile,
        finishOutbound,
        update,
        statuses,
        addStatus,
        reactions,
        setOutboundReaction,
        removeOutboundReaction,
        setInboundReaction,
        optOut,
        isMember,
        lockExternal
      })
    })
  )
}

import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { type ChannelType, channelRules } from "../providers/Domain.ts"
import { withLinks } from "../media/Links.ts"
import type { NewAttachment } from "../media/Domain.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import type { VisibleChannels } from "../auth/ChannelAccess.ts"
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

/** Everything a send needs about its target thread, in one read. */
export interface ThreadContext {
  readonly id: number
  readonly conversation_id: number
  readonly channel_id: number
  readonly channel_type: ChannelType
  readonly channel_status: "connected" | "disconnected"
  readonly channel_deleted: boolean
  readonly contact_account_id: number | null
  readonly account_external_id: string | null
  readonly external_thread_id: string | null
  readonly is_group: boolean
  readonly last_inbound_at: Date | null
  readonly contact_id: number
  readonly contact_blocked: boolean
  readonly provider: "sandbox" | "telegram" | "whatsapp_cloud"
  readonly credentials: Uint8Array | null
  readonly settings: Record<string, unknown>
}

export interface ChannelRow {
  readonly id: number
  readonly company_id: number
  readonly type: ChannelType
  readonly provider: "sandbox" | "telegram" | "whatsapp_cloud"
  readonly status: "connected" | "disconnected"
  readonly credentials: Uint8Array | null
  readonly settings: Record<string, unknown>
}

export interface AccountRow {
  readonly id: number
  readonly contact_id: number
  readonly channel_type: string
  readonly external_id: string
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

export interface Profile {
  readonly username: string | null
  readonly name: string | null
  readonly phone: string | null
  readonly profilePicture: string | null
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
  find(companyId: number, id: number): Effect.Effect<Option.Option<MessageRow>>
  findForUpdate(companyId: number, id: number): Effect.Effect<Option.Option<MessageRow>>
  findByExternal(companyId: number, channelId: number, externalMessageId: string, direction: "inbound" | "outbound" | null): Effect.Effect<Option.Option<MessageRow>>
  attachments(companyId: number, messageIds: ReadonlyArray<number>): Effect.Effect<ReadonlyMap<number, ReadonlyArray<Attachment>>>
  list(companyId: number, visible: VisibleChannels, filter: ListFilter): Effect.Effect<{ readonly rows: ReadonlyArray<MessageRow>; readonly total: number | null }>
  around(companyId: number, visible: VisibleChannels, anchor: MessageRow, limit: number): Effect.Effect<{ readonly before: ReadonlyArray<MessageRow>; readonly after: ReadonlyArray<MessageRow> }>
  insert(companyId: number, message: NewMessage): Effect.Effect<{ readonly row: MessageRow; readonly attachments: ReadonlyArray<Attachment> }>
  addAttachments(companyId: number, messageId: number, list: ReadonlyArray<NewAttachment>): Effect.Effect<ReadonlyArray<Attachment>>
  /** Records fetched bytes on an attachment that has none yet; None when another fetch got there first. */
  storeAttachmentFile(companyId: number, messageId: number, attachmentId: number, file: {
    readonly storagePath: string
    readonly mimeType: string | null
    readonly size: number
  }): Effect.Effect<Option.Option<Attachment>>
  /**
   * The message (status `pending`) and the conversation's `last_message_at` in one statement, with
   * the caller's companion write (`guard`, e.g. an idempotency claim given the new message's id as
   * a SQL expression) deciding whether anything is written: none when it does not pass.
   */
  insertOutbound(companyId: number, message: NewMessage, guard?: (messageId: Statement.Fragment) => {
    readonly writes: Statement.Fragment
    readonly passed: Statement.Fragment
  }): Effect.Effect<Option.Option<{ readonly row: MessageRow; readonly attachments: ReadonlyArray<Attachment> }>>
  /**
   * The provider's outcome (status, provider ids, the history row) as companion writes for the
   * statement that emits `message.created`, and the row as it reads once they are written.
   */
  finishOutbound(companyId: number, row: MessageRow, outcome: {
    readonly status: string
    readonly error: string | null
    readonly externalMessageId: string | null
    readonly externalThreadId: string | null
  }, now: Date): { readonly writes: Statement.Fragment; readonly finished: MessageRow }
  update(companyId: number, id: number, patch: {
    readonly content?: string | null
    readonly edited?: boolean
    readonly deleted?: boolean
    readonly revoked?: boolean
    readonly status?: string
    readonly externalMessageId?: string | null
    readonly externalThreadId?: string | null
  }): Effect.Effect<MessageRow>
  statuses(companyId: number, messageId: number): Effect.Effect<ReadonlyArray<StatusEntry>>
  addStatus(companyId: number, messageId: number, status: string, error: string | null): Effect.Effect<StatusEntry>
  reactions(companyId: number, messageId: number): Effect.Effect<ReadonlyArray<Reaction>>
  setOutboundReaction(companyId: number, messageId: number, channelId: number, input: {
    readonly reaction: string
    readonly authorUserId: number | null
    readonly authorContactAccountId: number | null
  }): Effect.Effect<{ readonly reaction: Reaction; readonly replaced: boolean }>
  removeOutboundReaction(companyId: number, messageId: number, channelId: number): Effect.Effect<Option.Option<Reaction>>
  setInboundReaction(companyId: number, messageId: number, channelId: number, accountId: number, reaction: string | null): Effect.Effect<{ readonly removed: boolean; readonly reaction: Reaction | null }>
  channel(companyId: number, id: number): Effect.Effect<Option.Option<ChannelRow>>
  channelsOfType(companyId: number, type: string): Effect.Effect<ReadonlyArray<ChannelRow>>
  threadContext(companyId: number, threadId: number): Effect.Effect<Option.Option<ThreadContext>>
  contact(companyId: number, id: number): Effect.Effect<Option.Option<{ readonly id: number; readonly blocked: boolean; readonly phones: ReadonlyArray<string> }>>
  account(companyId: number, id: number): Effect.Effect<Option.Option<AccountRow>>
  accountsOfContact(companyId: number, contactId: number, channelType: string): Effect.Effect<ReadonlyArray<AccountRow>>
  findAccount(companyId: number, channelType: string, by: { readonly externalId?: string; readonly phone?: string; readonly username?: string }): Effect.Effect<Option.Option<AccountRow>>
  threadOf(companyId: number, channelId: number, accountId: number): Effect.Effect<Option.Option<{ readonly id: number; readonly conversation_id: number }>>
  threadsOfAccount(companyId: number, accountId: number): Effect.Effect<ReadonlyArray<{ readonly id: number; readonly channel_id: number }>>
  /** Find-or-create, race-safe inside the caller's transaction. */
  ensureAccount(companyId: number, channelType: string, externalId: string, profile: Profile): Effect.Effect<AccountRow & { readonly created: boolean }>
  ensureConversation(companyId: number, contactId: number): Effect.Effect<{ readonly id: number; readonly created: boolean }>
  ensureThread(companyId: number, input: {
    readonly channelId: number
    readonly conversationId: number
    readonly accountId: number
    readonly externalThreadId: string | null
    readonly group: boolean
  }): Effect.Effect<{ readonly id: number; readonly conversation_id: number; readonly created: boolean }>
  groupThread(companyId: number, channelId: number, externalThreadId: string): Effect.Effect<Option.Option<{ readonly id: number; readonly conversation_id: number }>>
  hasMessages(companyId: number, conversationId: number): Effect.Effect<boolean>
  touchInbound(companyId: number, threadId: number, conversationId: number, at: Date): Effect.Effect<void>
  optOut(companyId: number, contactId: number): Effect.Effect<Option.Option<Date>>
  isMember(companyId: number, userId: number): Effect.Effect<boolean>
  /** Serializes writers of one (channel, external id) for the rest of the transaction. */
  lockExternal(channelId: number, externalId: string): Effect.Effect<void>
}>()("crm/messages/MessagesRepo") {
  static readonly layer = Layer.effect(
    MessagesRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const signed = yield* SignedUrls
      const toAttachment = (companyId: number) => ({ message_id, ...row }: AttachmentRow): Attachment =>
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

      const find = (companyId: number, id: number) =>
        sql<MessageRow>`SELECT ${columns} FROM ${from} WHERE m.company_id = ${companyId} AND m.id = ${id}`.pipe(
          Effect.map(first),
          Effect.orDie
        )

      const findForUpdate = (companyId: number, id: number) =>
        sql<MessageRow>`SELECT ${columns} FROM ${from} WHERE m.company_id = ${companyId} AND m.id = ${id} FOR UPDATE OF m`.pipe(
          Effect.map(first),
          Effect.orDie
        )

      const findByExternal = (companyId: number, channelId: number, externalId: string, direction: "inbound" | "outbound" | null) =>
        sql<MessageRow>`
          SELECT ${columns} FROM ${from}
          WHERE m.channel_id = ${channelId} AND m.external_message_id = ${externalId} AND m.company_id = ${companyId}
            ${direction === null ? sql`` : sql`AND m.direction = ${direction}`}
          ORDER BY m.id LIMIT 1`.pipe(Effect.map(first), Effect.orDie)

      const attachments = (companyId: number, ids: ReadonlyArray<number>) =>
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

      const list = (companyId: number, visible: VisibleChannels, f: ListFilter) =>
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

      const around = (companyId: number, visible: VisibleChannels, anchor: MessageRow, limit: number) =>
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

      const insert = (companyId: number, m: NewMessage) =>
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

      const insertAttachments = (companyId: number, messageId: number, list: ReadonlyArray<NewAttachment>) =>
        list.length === 0
          ? Effect.succeed([] as ReadonlyArray<Attachment>)
          : sql<AttachmentRow>`INSERT INTO attachments ${
            sql.insert(list.map((a) => ({
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
            })) as any)
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

      const addAttachments = (companyId: number, messageId: number, list: ReadonlyArray<NewAttachment>) =>
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

      const statuses = (companyId: number, messageId: number) =>
        sql<{ id: number; message_id: number; status: string; error: string | null; created_at: Date }>`
          SELECT id, message_id, status, error, created_at FROM message_statuses
          WHERE company_id = ${companyId} AND message_id = ${messageId} ORDER BY id`.pipe(
          Effect.map((rows) => rows.map(toStatus)),
          Effect.orDie
        )

      const addStatus = (companyId: number, messageId: number, status: string, error: string | null) =>
        sql<{ id: number; message_id: number; status: string; error: string | null; created_at: Date }>`
          INSERT INTO message_statuses (company_id, message_id, status, error)
          VALUES (${companyId}, ${messageId}, ${status}, ${error})
          RETURNING id, message_id, status, error, created_at`.pipe(
          Effect.map((rows) => toStatus(rows[0])),
          Effect.orDie
        )

      const reactionColumns = sql`id, message_id, channel_id, direction, reaction, author_user_id, author_contact_account_id, created_at, updated_at`

      const reactions = (companyId: number, messageId: number) =>
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

      const removeOutboundReaction = (companyId: number, messageId: number, channelId: number) =>
        sql<ReactionRow>`
          DELETE FROM message_reactions
          WHERE company_id = ${companyId} AND message_id = ${messageId} AND channel_id = ${channelId} AND direction = 'outbound'
          RETURNING ${reactionColumns}`.pipe(
          Effect.map((rows) => Option.map(first(rows), toReaction)),
          Effect.orDie
        )

      const setInboundReaction = (companyId: number, messageId: number, channelId: number, accountId: number, reaction: string | null) =>
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

      const channelColumns = sql`id, company_id, type, provider, status, credentials, settings`

      const channel = (companyId: number, id: number) =>
        sql<ChannelRow>`
          SELECT ${channelColumns} FROM channels
          WHERE company_id = ${companyId} AND id = ${id} AND deleted_at IS NULL`.pipe(Effect.map(first), Effect.orDie)

      const channelsOfType = (companyId: number, type: string) =>
        sql<ChannelRow>`
          SELECT ${channelColumns} FROM channels
          WHERE company_id = ${companyId} AND type = ${type} AND deleted_at IS NULL ORDER BY id`.pipe(Effect.orDie)

      const threadContext = (companyId: number, threadId: number) =>
        sql<ThreadContext>`
          SELECT t.id, t.conversation_id, t.channel_id, ch.type AS channel_type, ch.status AS channel_status,
                 (ch.deleted_at IS NOT NULL) AS channel_deleted, t.contact_account_id, ca.external_id AS account_external_id,
                 t.external_thread_id, t.is_group, t.last_inbound_at, cv.contact_id, (ct.blocked_at IS NOT NULL) AS contact_blocked,
                 ch.provider, ch.credentials, ch.settings
          FROM threads t
          JOIN channels ch ON ch.id = t.channel_id
          JOIN conversations cv ON cv.id = t.conversation_id
          JOIN contacts ct ON ct.id = cv.contact_id
          LEFT JOIN contact_accounts ca ON ca.id = t.contact_account_id
          WHERE t.company_id = ${companyId} AND t.id = ${threadId}`.pipe(Effect.map(first), Effect.orDie)

      const contact = (companyId: number, id: number) =>
        sql<{ id: number; blocked: boolean; phones: ReadonlyArray<string> | null }>`
          SELECT c.id, (c.blocked_at IS NOT NULL) AS blocked,
                 (SELECT array_agg(p.phone ORDER BY p.position, p.id) FROM contact_phones p WHERE p.contact_id = c.id) AS phones
          FROM contacts c WHERE c.company_id = ${companyId} AND c.id = ${id} AND c.deleted_at IS NULL`.pipe(
          Effect.map((rows) => Option.map(first(rows), (r) => ({ ...r, phones: r.phones ?? [] }))),
          Effect.orDie
        )

      const accountColumns = sql`id, contact_id, channel_type, external_id`

      const account = (companyId: number, id: number) =>
        sql<AccountRow>`SELECT ${accountColumns} FROM contact_accounts WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.map(first),
          Effect.orDie
        )

      const accountsOfContact = (companyId: number, contactId: number, channelType: string) =>
        sql<AccountRow>`
          SELECT ${accountColumns} FROM contact_accounts
          WHERE company_id = ${companyId} AND contact_id = ${contactId} AND channel_type = ${channelType} ORDER BY id`.pipe(Effect.orDie)

      const findAccount: MessagesRepo["Service"]["findAccount"] = (companyId, channelType, by) => {
        const where = by.externalId !== undefined
          ? sql`external_id = ${by.externalId}`
          : by.phone !== undefined
          ? sql`(regexp_replace(phone, '\\D', '', 'g') = ${by.phone} OR contact_id IN (
              SELECT p.contact_id FROM contact_phones p
              WHERE p.company_id = ${companyId} AND regexp_replace(p.phone, '\\D', '', 'g') = ${by.phone}))`
          : sql`lower(username) = lower(${by.username ?? ""})`
        return sql<AccountRow>`
          SELECT ${accountColumns} FROM contact_accounts
          WHERE company_id = ${companyId} AND channel_type = ${channelType} AND ${where} ORDER BY id LIMIT 1`.pipe(
          Effect.map(first),
          Effect.orDie
        )
      }

      const threadOf = (companyId: number, channelId: number, accountId: number) =>
        sql<{ id: number; conversation_id: number }>`
          SELECT id, conversation_id FROM threads
          WHERE company_id = ${companyId} AND channel_id = ${channelId} AND contact_account_id = ${accountId} AND NOT is_group`.pipe(
          Effect.map(first),
          Effect.orDie
        )

      const threadsOfAccount = (companyId: number, accountId: number) =>
        sql<{ id: number; channel_id: number }>`
          SELECT t.id, t.channel_id FROM threads t JOIN channels ch ON ch.id = t.channel_id AND ch.deleted_at IS NULL
          WHERE t.company_id = ${companyId} AND t.contact_account_id = ${accountId} AND NOT t.is_group ORDER BY t.id`.pipe(
          Effect.orDie
        )

      const splitName = (name: string | null) => {
        if (name === null) return { first: null, last: null }
        const parts = name.trim().split(/\s+/)
        return { first: parts[0] ?? null, last: parts.length > 1 ? parts.slice(1).join(" ") : null }
      }

      const ensureAccount = (companyId: number, channelType: string, externalId: string, profile: Profile) =>
        Effect.gen(function*() {
          const existing = yield* sql<AccountRow>`
            SELECT ${accountColumns} FROM contact_accounts
            WHERE company_id = ${companyId} AND channel_type = ${channelType} AND external_id = ${externalId}`
          if (existing.length > 0) {
            const row = existing[0]
            if (profile.username !== null || profile.name !== null || profile.phone !== null || profile.profilePicture !== null) {
              yield* sql`
                UPDATE contact_accounts SET
                  username = COALESCE(${profile.username}, username),
                  display_name = COALESCE(${profile.name}, display_name),
                  phone = COALESCE(${profile.phone}, phone),
                  profile_picture = COALESCE(${profile.profilePicture}, profile_picture)
                WHERE id = ${row.id} AND (
                  username IS DISTINCT FROM COALESCE(${profile.username}, username)
                  OR display_name IS DISTINCT FROM COALESCE(${profile.name}, display_name)
                  OR phone IS DISTINCT FROM COALESCE(${profile.phone}, phone)
                  OR profile_picture IS DISTINCT FROM COALESCE(${profile.profilePicture}, profile_picture))`
            }
            return { ...row, created: false }
          }
          const name = splitName(profile.name)
          const display = profile.name ?? profile.username ?? profile.phone ?? externalId
          const [contact] = yield* sql<{ id: number }>`
            INSERT INTO contacts (company_id, first_name, last_name, display_name, status)
            VALUES (${companyId}, ${name.first}, ${name.last}, ${display}, 'lead') RETURNING id`
          const inserted = yield* sql<AccountRow>`
            INSERT INTO contact_accounts (company_id, contact_id, channel_type, external_id, username, display_name, phone, profile_picture)
            VALUES (${companyId}, ${contact.id}, ${channelType}, ${externalId}, ${profile.username}, ${profile.name},
                    ${profile.phone}, ${profile.profilePicture})
            ON CONFLICT (company_id, channel_type, external_id) DO NOTHING
            RETURNING ${accountColumns}`
          if (inserted.length === 0) {
            // A concurrent writer created the account first; its contact is the one to keep.
            yield* sql`DELETE FROM contacts WHERE id = ${contact.id} AND company_id = ${companyId}`
            const [row] = yield* sql<AccountRow>`
              SELECT ${accountColumns} FROM contact_accounts
              WHERE company_id = ${companyId} AND channel_type = ${channelType} AND external_id = ${externalId}`
            return { ...row, created: false }
          }
          if (profile.phone !== null) {
            yield* sql`
              INSERT INTO contact_phones (company_id, contact_id, phone, type)
              VALUES (${companyId}, ${contact.id}, ${profile.phone}, 'mobile')`
          }
          return { ...inserted[0], created: true }
        }).pipe(Effect.orDie)

      const ensureConversation = (companyId: number, contactId: number) =>
        Effect.gen(function*() {
          const inserted = yield* sql<{ id: number }>`
            INSERT INTO conversations (company_id, contact_id) VALUES (${companyId}, ${contactId})
            ON CONFLICT (company_id, contact_id) DO NOTHING RETURNING id`
          if (inserted.length > 0) return { id: inserted[0].id, created: true }
          const [row] = yield* sql<{ id: number }>`
            SELECT id FROM conversations WHERE company_id = ${companyId} AND contact_id = ${contactId}`
          return { id: row.id, created: false }
        }).pipe(Effect.orDie)

      const ensureThread: MessagesRepo["Service"]["ensureThread"] = (companyId, t) =>
        Effect.gen(function*() {
          const inserted = yield* (t.group
            ? sql<{ id: number; conversation_id: number }>`
                INSERT INTO threads (company_id, conversation_id, channel_id, contact_account_id, external_thread_id, is_group)
                VALUES (${companyId}, ${t.conversationId}, ${t.channelId}, ${t.accountId}, ${t.externalThreadId}, true)
                ON CONFLICT (channel_id, external_thread_id) WHERE is_group DO NOTHING
                RETURNING id, conversation_id`
            : sql<{ id: number; conversation_id: number }>`
                INSERT INTO threads (company_id, conversation_id, channel_id, contact_account_id, external_thread_id, is_group)
                VALUES (${companyId}, ${t.conversationId}, ${t.channelId}, ${t.accountId}, ${t.externalThreadId}, false)
                ON CONFLICT (channel_id, contact_account_id) WHERE NOT is_group DO NOTHING
                RETURNING id, conversation_id`)
          if (inserted.length > 0) return { ...inserted[0], created: true }
          const [row] = yield* (t.group
            ? sql<{ id: number; conversation_id: number }>`
                SELECT id, conversation_id FROM threads
                WHERE company_id = ${companyId} AND channel_id = ${t.channelId} AND external_thread_id = ${t.externalThreadId} AND is_group`
            : sql<{ id: number; conversation_id: number }>`
                SELECT id, conversation_id FROM threads
                WHERE company_id = ${companyId} AND channel_id = ${t.channelId} AND contact_account_id = ${t.accountId} AND NOT is_group`)
          if (!t.group && t.externalThreadId !== null) {
            yield* sql`
              UPDATE threads SET external_thread_id = ${t.externalThreadId}
              WHERE id = ${row.id} AND external_thread_id IS DISTINCT FROM ${t.externalThreadId}`
          }
          return { ...row, created: false }
        }).pipe(Effect.orDie)

      const groupThread = (companyId: number, channelId: number, externalThreadId: string) =>
        sql<{ id: number; conversation_id: number }>`
          SELECT id, conversation_id FROM threads
          WHERE company_id = ${companyId} AND channel_id = ${channelId} AND external_thread_id = ${externalThreadId} AND is_group`.pipe(
          Effect.map(first),
          Effect.orDie
        )

      const hasMessages = (companyId: number, conversationId: number) =>
        sql<{ found: boolean }>`
          SELECT EXISTS (SELECT 1 FROM messages WHERE company_id = ${companyId} AND conversation_id = ${conversationId}) AS found`.pipe(
          Effect.map((rows) => rows[0].found),
          Effect.orDie
        )

      const touchInbound = (companyId: number, threadId: number, conversationId: number, at: Date) =>
        Effect.all([
          sql`
            UPDATE threads SET last_inbound_at = GREATEST(last_inbound_at, ${at}::timestamptz), updated_at = now()
            WHERE company_id = ${companyId} AND id = ${threadId}`,
          sql`
            UPDATE conversations SET last_message_at = GREATEST(last_message_at, ${at}::timestamptz), updated_at = now()
            WHERE company_id = ${companyId} AND id = ${conversationId}`
        ], { concurrency: 1, discard: true }).pipe(Effect.orDie)

      const optOut = (companyId: number, contactId: number) =>
        sql<{ opted_out_at: Date }>`
          UPDATE contacts SET opted_out_at = now(), updated_at = now()
          WHERE company_id = ${companyId} AND id = ${contactId} AND opted_out_at IS NULL
          RETURNING opted_out_at`.pipe(Effect.map((rows) => Option.map(first(rows), (r) => r.opted_out_at)), Effect.orDie)

      const isMember = (companyId: number, userId: number) =>
        sql<{ found: boolean }>`
          SELECT EXISTS (SELECT 1 FROM memberships WHERE company_id = ${companyId} AND user_id = ${userId}) AS found`.pipe(
          Effect.map((rows) => rows[0].found),
          Effect.orDie
        )

      const lockExternal = (channelId: number, externalId: string) =>
        sql`SELECT pg_advisory_xact_lock(${channelId}::int, hashtext(${externalId}))`.pipe(Effect.asVoid, Effect.orDie)

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
        channel,
        channelsOfType,
        threadContext,
        contact,
        account,
        accountsOfContact,
        findAccount,
        threadOf,
        threadsOfAccount,
        ensureAccount,
        ensureConversation,
        ensureThread,
        groupThread,
        hasMessages,
        touchInbound,
        optOut,
        isMember,
        lockExternal
      })
    })
  )
}

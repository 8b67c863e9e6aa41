import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import type { ChannelType } from "../providers/Domain.ts"
import { idArray } from "../platform/Sql.ts"

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

export interface Profile {
  readonly username: string | null
  readonly name: string | null
  readonly phone: string | null
  readonly profilePicture: string | null
}

/** Channels, threads and contact accounts as messaging reads and upserts them (sends and ingestion). */
export class ThreadsRepo extends Context.Service<ThreadsRepo, {
  channel(companyId: CompanyId, id: number): Effect.Effect<Option.Option<ChannelRow>>
  channelsOfType(companyId: CompanyId, type: string): Effect.Effect<ReadonlyArray<ChannelRow>>
  threadContext(companyId: CompanyId, threadId: number): Effect.Effect<Option.Option<ThreadContext>>
  /** `threadContext` of some threads at once, by thread id (a thread not the company's is absent). */
  threadContexts(companyId: CompanyId, threadIds: ReadonlyArray<number>): Effect.Effect<ReadonlyMap<number, ThreadContext>>
  contact(companyId: CompanyId, id: number): Effect.Effect<Option.Option<{ readonly id: number; readonly blocked: boolean; readonly phones: ReadonlyArray<string> }>>
  account(companyId: CompanyId, id: number): Effect.Effect<Option.Option<AccountRow>>
  accountsOfContact(companyId: CompanyId, contactId: number, channelType: string): Effect.Effect<ReadonlyArray<AccountRow>>
  findAccount(companyId: CompanyId, channelType: string, by: { readonly externalId?: string; readonly phone?: string; readonly username?: string }): Effect.Effect<Option.Option<AccountRow>>
  threadOf(companyId: CompanyId, channelId: number, accountId: number): Effect.Effect<Option.Option<{ readonly id: number; readonly conversation_id: number }>>
  threadsOfAccount(companyId: CompanyId, accountId: number): Effect.Effect<ReadonlyArray<{ readonly id: number; readonly channel_id: number }>>
  /** Find-or-create, race-safe inside the caller's transaction. */
  ensureAccount(companyId: CompanyId, channelType: string, externalId: string, profile: Profile): Effect.Effect<AccountRow & { readonly created: boolean }>
  ensureConversation(companyId: CompanyId, contactId: number): Effect.Effect<{ readonly id: number; readonly created: boolean }>
  ensureThread(companyId: CompanyId, input: {
    readonly channelId: number
    readonly conversationId: number
    readonly accountId: number
    readonly externalThreadId: string | null
    readonly group: boolean
  }): Effect.Effect<{ readonly id: number; readonly conversation_id: number; readonly created: boolean }>
  groupThread(companyId: CompanyId, channelId: number, externalThreadId: string): Effect.Effect<Option.Option<{ readonly id: number; readonly conversation_id: number }>>
  /**
   * Moves the thread's customer window and the conversation's last activity to an inbound message at
   * `at`, before it is stored; answers whether the conversation had no message until then.
   */
  touchInbound(companyId: CompanyId, threadId: number, conversationId: number, at: Date): Effect.Effect<{ readonly first: boolean }>
}>()("crm/messages/ThreadsRepo") {
  static readonly layer = Layer.effect(
    ThreadsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const first = <A>(rows: ReadonlyArray<A>) => Option.fromNullishOr(rows[0])

      const channelColumns = sql`id, company_id, type, provider, status, credentials, settings`

      const channel = (companyId: CompanyId, id: number) =>
        sql<ChannelRow>`
          SELECT ${channelColumns} FROM channels
          WHERE company_id = ${companyId} AND id = ${id} AND deleted_at IS NULL`.pipe(Effect.map(first), Effect.orDie)

      const channelsOfType = (companyId: CompanyId, type: string) =>
        sql<ChannelRow>`
          SELECT ${channelColumns} FROM channels
          WHERE company_id = ${companyId} AND type = ${type} AND deleted_at IS NULL ORDER BY id`.pipe(Effect.orDie)

      const contexts = (companyId: CompanyId, threadIds: Statement.Fragment) =>
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
          WHERE t.company_id = ${companyId} AND t.id ${threadIds}`.pipe(Effect.orDie)

      const threadContext = (companyId: CompanyId, threadId: number) => Effect.map(contexts(companyId, sql`= ${threadId}`), first)

      const threadContexts = (companyId: CompanyId, threadIds: ReadonlyArray<number>) =>
        Effect.map(contexts(companyId, sql`= ANY(${idArray(threadIds)}::bigint[])`), (rows) => new Map(rows.map((r) => [Number(r.id), r])))

      const contact = (companyId: CompanyId, id: number) =>
        sql<{ id: number; blocked: boolean; phones: ReadonlyArray<string> | null }>`
          SELECT c.id, (c.blocked_at IS NOT NULL) AS blocked,
                 (SELECT array_agg(p.phone ORDER BY p.position, p.id) FROM contact_phones p WHERE p.contact_id = c.id) AS phones
          FROM contacts c WHERE c.company_id = ${companyId} AND c.id = ${id} AND c.deleted_at IS NULL`.pipe(
          Effect.map((rows) => Option.map(first(rows), (r) => ({ ...r, phones: r.phones ?? [] }))),
          Effect.orDie
        )

      const accountColumns = sql`id, contact_id, channel_type, external_id`

      const account = (companyId: CompanyId, id: number) =>
        sql<AccountRow>`SELECT ${accountColumns} FROM contact_accounts WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.map(first),
          Effect.orDie
        )

      const accountsOfContact = (companyId: CompanyId, contactId: number, channelType: string) =>
        sql<AccountRow>`
          SELECT ${accountColumns} FROM contact_accounts
          WHERE company_id = ${companyId} AND contact_id = ${contactId} AND channel_type = ${channelType} ORDER BY id`.pipe(Effect.orDie)

      const findAccount: ThreadsRepo["Service"]["findAccount"] = (companyId, channelType, by) => {
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

      const threadOf = (companyId: CompanyId, channelId: number, accountId: number) =>
        sql<{ id: number; conversation_id: number }>`
          SELECT id, conversation_id FROM threads
          WHERE company_id = ${companyId} AND channel_id = ${channelId} AND contact_account_id = ${accountId} AND NOT is_group`.pipe(
          Effect.map(first),
          Effect.orDie
        )

      const threadsOfAccount = (companyId: CompanyId, accountId: number) =>
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

      const ensureAccount = (companyId: CompanyId, channelType: string, externalId: string, profile: Profile) =>
        Effect.gen(function*() {
          const where = sql`company_id = ${companyId} AND channel_type = ${channelType} AND external_id = ${externalId}`
          const refresh = profile.username !== null || profile.name !== null || profile.phone !== null || profile.profilePicture !== null
          // The row as it was, and (in the same statement: one round trip per inbound message) the profile
          // fields the provider sent written over it where they differ.
          const existing = yield* (refresh
            ? sql<AccountRow>`
                WITH existing AS (SELECT ${accountColumns} FROM contact_accounts WHERE ${where}), refreshed AS (
                  UPDATE contact_accounts SET
                    username = COALESCE(${profile.username}, username),
                    display_name = COALESCE(${profile.name}, display_name),
                    phone = COALESCE(${profile.phone}, phone),
                    profile_picture = COALESCE(${profile.profilePicture}, profile_picture)
                  WHERE id = (SELECT id FROM existing) AND (
                    username IS DISTINCT FROM COALESCE(${profile.username}, username)
                    OR display_name IS DISTINCT FROM COALESCE(${profile.name}, display_name)
                    OR phone IS DISTINCT FROM COALESCE(${profile.phone}, phone)
                    OR profile_picture IS DISTINCT FROM COALESCE(${profile.profilePicture}, profile_picture))
                )
                SELECT * FROM existing`
            : sql<AccountRow>`SELECT ${accountColumns} FROM contact_accounts WHERE ${where}`)
          if (existing.length > 0) {
            const row = existing[0]
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

      const ensureConversation = (companyId: CompanyId, contactId: number) =>
        Effect.gen(function*() {
          // Looked up first: almost every message is in a conversation that exists.
          const find = sql<{ id: number }>`SELECT id FROM conversations WHERE company_id = ${companyId} AND contact_id = ${contactId}`
          const existing = yield* find
          if (existing.length > 0) return { id: existing[0].id, created: false }
          const inserted = yield* sql<{ id: number }>`
            INSERT INTO conversations (company_id, contact_id) VALUES (${companyId}, ${contactId})
            ON CONFLICT (company_id, contact_id) DO NOTHING RETURNING id`
          if (inserted.length > 0) return { id: inserted[0].id, created: true }
          // A concurrent writer created it after the lookup; this statement's snapshot sees its commit.
          const [row] = yield* find
          return { id: row.id, created: false }
        }).pipe(Effect.orDie)

      const ensureThread: ThreadsRepo["Service"]["ensureThread"] = (companyId, t) =>
        Effect.gen(function*() {
          type Found = { id: number; conversation_id: number; external_thread_id: string | null }
          const find = t.group
            ? sql<Found>`
                SELECT id, conversation_id, external_thread_id FROM threads
                WHERE company_id = ${companyId} AND channel_id = ${t.channelId} AND external_thread_id = ${t.externalThreadId} AND is_group`
            : sql<Found>`
                SELECT id, conversation_id, external_thread_id FROM threads
                WHERE company_id = ${companyId} AND channel_id = ${t.channelId} AND contact_account_id = ${t.accountId} AND NOT is_group`
          const existing = (sel: ReadonlyArray<Found>) =>
            Effect.gen(function*() {
              const row = sel[0]
              if (!t.group && t.externalThreadId !== null && row.external_thread_id !== t.externalThreadId) {
                yield* sql`
                  UPDATE threads SET external_thread_id = ${t.externalThreadId}
                  WHERE id = ${row.id} AND external_thread_id IS DISTINCT FROM ${t.externalThreadId}`
              }
              return { id: row.id, conversation_id: row.conversation_id, created: false }
            })
          // Looked up first: almost every message is on a thread that exists.
          const found = yield* find
          if (found.length > 0) return yield* existing(found)
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
          // A concurrent writer created it after the lookup; this statement's snapshot sees its commit.
          return yield* existing(yield* find)
        }).pipe(Effect.orDie)

      const groupThread = (companyId: CompanyId, channelId: number, externalThreadId: string) =>
        sql<{ id: number; conversation_id: number }>`
          SELECT id, conversation_id FROM threads
          WHERE company_id = ${companyId} AND channel_id = ${channelId} AND external_thread_id = ${externalThreadId} AND is_group`.pipe(
          Effect.map(first),
          Effect.orDie
        )

      const touchInbound = (companyId: CompanyId, threadId: number, conversationId: number, at: Date) =>
        sql<{ first: boolean }>`
          WITH touched AS (
            UPDATE threads SET last_inbound_at = GREATEST(last_inbound_at, ${at}::timestamptz), updated_at = now()
            WHERE company_id = ${companyId} AND id = ${threadId}
          ), moved AS (
            UPDATE conversations SET last_message_at = GREATEST(last_message_at, ${at}::timestamptz), updated_at = now()
            WHERE company_id = ${companyId} AND id = ${conversationId}
          )
          SELECT NOT EXISTS (SELECT 1 FROM messages WHERE company_id = ${companyId} AND conversation_id = ${conversationId}) AS first`.pipe(
          Effect.map((rows) => ({ first: rows[0].first })),
          Effect.orDie
        )

      return ThreadsRepo.of({
        channel,
        channelsOfType,
        threadContext,
        threadContexts,
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
        touchInbound
      })
    })
  )
}

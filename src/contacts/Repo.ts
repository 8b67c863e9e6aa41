import { Array as Arr, Context, Effect, Layer, Option } from "effect"
import type { CompanyId } from "../auth/Domain.ts"
import { SqlClient, type Statement } from "effect/sql"
import type { ChannelContext } from "../providers/Provider.ts"
import type { ChannelType } from "../providers/Domain.ts"
import type { Contact, ContactAccount, ContactStatus, ListParams, MergeCounts } from "./Domain.ts"
import { idArray, likeEscape } from "../platform/Sql.ts"

export interface ContactRow {
  readonly id: number
  readonly company_id: number
  readonly first_name: string | null
  readonly last_name: string | null
  readonly display_name: string | null
  readonly company_name: string | null
  readonly status: ContactStatus
  readonly blocked_at: Date | null
  readonly blocked_reason: string | null
  readonly blocked_by_user_id: number | null
  readonly opted_out_at: Date | null
  readonly merged_into_contact_id: number | null
  readonly photo_path: string | null
  readonly photo_mime_type: string | null
  readonly custom_fields: Record<string, unknown> | null
  readonly created_at: Date
  readonly updated_at: Date
  readonly deleted_at: Date | null
}

/** The contact as the API shows it, less the signed photo link, plus where a photo would come from. */
export interface ContactRecord extends Omit<Contact, "photo_url"> {
  readonly photo_path: string | null
  readonly photo_mime_type: string | null
  /** Linked accounts' pictures, newest account first. */
  readonly pictures: ReadonlyArray<string>
  readonly deleted: boolean
}

export interface ContactFields {
  readonly first_name: string | null
  readonly last_name: string | null
  readonly display_name: string
  readonly company_name: string | null
  readonly status: ContactStatus
  /** A stored image (blob store path) and its type; absent keeps the current photo. */
  readonly photo_path?: string | null
  readonly photo_mime_type?: string | null
  /** The whole object as JSON text; absent keeps the stored fields. */
  readonly custom_fields?: string
}

export interface PhoneValue {
  readonly phone: string
  readonly type: string
}
export interface EmailValue {
  readonly email: string
  readonly type: string
}
export interface AccountValue {
  readonly channel_type: ChannelType
  readonly external_id: string
  /** `undefined` keeps what is stored (an account the provider keeps up to date). */
  readonly username: string | null | undefined
  readonly profile_picture: string | null | undefined
}

/** One thread of the contact on a channel that can block users at the provider. */
export interface BlockTarget {
  readonly channel_id: number
  readonly channel_name: string
  readonly channel_type: ChannelType
  readonly provider: ChannelContext["provider"]
  readonly status: ChannelContext["status"]
  readonly credentials: Uint8Array | null
  readonly settings: Record<string, unknown>
  readonly recipient: string | null
  readonly last_inbound_at: Date | null
}



export interface ResolveKeys {
  readonly digits: ReadonlyArray<string>
  readonly externalIds: ReadonlyArray<string>
  readonly usernames: ReadonlyArray<string>
}

export interface ResolveMatches {
  readonly byDigits: ReadonlyMap<string, number>
  readonly accounts: ReadonlyArray<{ readonly channel_type: string; readonly external_id: string; readonly username: string | null; readonly contact_id: number }>
}

const iso = (date: Date | null) => (date === null ? null : date.toISOString())

/** `%`, `_` and `\` match themselves inside a LIKE pattern. */

const columns = (sql: SqlClient.SqlClient) =>
  sql`c.id, c.company_id, c.first_name, c.last_name, c.display_name, c.company_name, c.status, c.blocked_at,
      c.blocked_reason, c.blocked_by_user_id, c.opted_out_at, c.merged_into_contact_id, c.photo_path, c.photo_mime_type,
      c.custom_fields, c.created_at, c.updated_at, c.deleted_at`

const phoneDigits = (sql: SqlClient.SqlClient, column: string) => sql`regexp_replace(${sql.literal(column)}, '[^0-9]', '', 'g')`

export interface TagRef {
  readonly id: number
  readonly name: string
}

export interface Taggings {
  readonly contacts: ReadonlyMap<number, ReadonlyArray<TagRef>>
  readonly tags: ReadonlyMap<number, TagRef>
}

/** Contacts of one company; every statement carries the company id. */export class ContactsRepo extends Context.Service<ContactsRepo, {
  list(companyId: CompanyId, params: ListParams & { readonly statusFilter: ReadonlyArray<string>; readonly excludeLidOnly: boolean }, page: number, perPage: number): Effect.Effect<{ readonly items: ReadonlyArray<ContactRecord>; readonly total: number }>
  lookup(companyId: CompanyId, q: string, limit: number): Effect.Effect<ReadonlyArray<ContactRecord>>
  /** A live contact; with `withMerged`, also one that was merged away (its `merged_into_contact_id` says where). */
  find(companyId: CompanyId, id: number, options?: { readonly withMerged?: boolean; readonly forUpdate?: boolean }): Effect.Effect<Option.Option<ContactRecord>>
  exists(companyId: CompanyId, id: number, forUpdate?: boolean): Effect.Effect<Option.Option<ContactRow>>
  insert(companyId: CompanyId, fields: ContactFields): Effect.Effect<number>
  update(companyId: CompanyId, id: number, patch: Partial<ContactFields>): Effect.Effect<void>
  replacePhones(companyId: CompanyId, id: number, phones: ReadonlyArray<PhoneValue>): Effect.Effect<void>
  replaceEmails(companyId: CompanyId, id: number, emails: ReadonlyArray<EmailValue>): Effect.Effect<void>
  /**
   * Makes the contact's accounts exactly `accounts` (kept rows keep their ids and threads). Fails
   * with the index of the first account that belongs to another contact.
   */
  replaceAccounts(companyId: CompanyId, id: number, accounts: ReadonlyArray<AccountValue>): Effect.Effect<void, { readonly conflictAt: number }>
  softDelete(companyId: CompanyId, id: number): Effect.Effect<boolean>
  channelCounts(companyId: CompanyId): Effect.Effect<ReadonlyMap<string, number>>
  resolve(companyId: CompanyId, keys: ResolveKeys): Effect.Effect<ResolveMatches>
  tagsOf(companyId: CompanyId, tagIds: ReadonlyArray<number>): Effect.Effect<ReadonlySet<number>>
  replaceTags(companyId: CompanyId, id: number, tagIds: ReadonlyArray<number>): Effect.Effect<void>
  /** A live contact's tags (in the contact's order) and the company's tag `tagId` (null: no such tag); none without a live contact. */
  /** The tags of the live contacts among `ids` (a contact absent is not live), and which of `tagIds` are the company's. */
  taggings(companyId: CompanyId, ids: ReadonlyArray<number>, tagIds: ReadonlyArray<number>): Effect.Effect<Taggings>
  /**
   * Tags added to (or removed from) live contacts, as data-modifying CTEs to write in one statement
   * with the events that announce them. `changedFor` holds in that statement for an event (`v`, see
   * `EventsRepo.insertMany`) whose contact had a row written, and for a `tag.added` whose own pair was.
   */
  changeTags(companyId: CompanyId, pairs: ReadonlyArray<{ readonly id: number; readonly tagId: number }>, adding: boolean): {
    readonly along: Statement.Fragment
    readonly changedFor: Statement.Fragment
  }
  mergeCounts(companyId: CompanyId, sourceId: number, targetId: number): Effect.Effect<MergeCounts>
  merge(companyId: CompanyId, sourceId: number, targetId: number): Effect.Effect<void>
  setOptOut(companyId: CompanyId, id: number, optedOut: boolean): Effect.Effect<Option.Option<Date | null>>
  setBlocked(companyId: CompanyId, id: number, block: { readonly reason: string | null; readonly userId: number | null } | null): Effect.Effect<Option.Option<ContactRow>>
  blockTargets(companyId: CompanyId, id: number): Effect.Effect<ReadonlyArray<BlockTarget>>
  /** An uploaded image of the company (the media table of uploads). */
  mediaImage(companyId: CompanyId, mediaId: number): Effect.Effect<Option.Option<{ readonly storage_path: string; readonly mime_type: string }>>
}>()("crm/contacts/ContactsRepo") {
  static readonly layer = Layer.effect(
    ContactsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const cols = columns(sql)

      const assemble = (companyId: CompanyId, rows: ReadonlyArray<ContactRow>) =>
        Effect.gen(function*() {
          if (rows.length === 0) return []
          const ids = rows.map((row) => row.id)
          const [phones, emails, accounts, tags] = yield* Effect.all([
            sql<{ contact_id: number; phone: string; type: string }>`
              SELECT contact_id, phone, type FROM contact_phones
              WHERE company_id = ${companyId} AND contact_id IN ${sql.in(ids)} ORDER BY position, id`,
            sql<{ contact_id: number; email: string; type: string }>`
              SELECT contact_id, email, type FROM contact_emails
              WHERE company_id = ${companyId} AND contact_id IN ${sql.in(ids)} ORDER BY position, id`,
            sql<ContactAccount & { contact_id: number }>`
              SELECT contact_id, id, channel_type, external_id, username, profile_picture FROM contact_accounts
              WHERE company_id = ${companyId} AND contact_id IN ${sql.in(ids)} ORDER BY id`,
            sql<{ contact_id: number; id: number; name: string }>`
              SELECT ct.contact_id, t.id, t.name FROM contact_tags ct JOIN tags t ON t.id = ct.tag_id AND t.company_id = ${companyId}
              WHERE ct.company_id = ${companyId} AND ct.contact_id IN ${sql.in(ids)} ORDER BY lower(t.name), t.id`
          ], { concurrency: 1 })
          const by = <A extends { readonly contact_id: number }>(items: ReadonlyArray<A>) => {
            const map = new Map<number, Array<A>>()
            for (const item of items) {
              const list = map.get(item.contact_id)
              if (list === undefined) map.set(item.contact_id, [item])
              else list.push(item)
            }
            return map
          }
          const phoneMap = by(phones)
          const emailMap = by(emails)
          const accountMap = by(accounts)
          const tagMap = by(tags)
          return rows.map((row): ContactRecord => {
            const linked = accountMap.get(row.id) ?? []
            return {
              id: row.id,
              company_id: row.company_id,
              firstName: row.first_name,
              lastName: row.last_name,
              displayName: row.display_name ?? "",
              company: row.company_name,
              status: row.status,
              phones: (phoneMap.get(row.id) ?? []).map((p) => ({ phone: p.phone, type: p.type })),
              emailes: (emailMap.get(row.id) ?? []).map((e) => ({ email: e.email, type: e.type })),
              contactAccounts: linked.map((a) => ({
                id: a.id,
                channel_type: a.channel_type,
                external_id: a.external_id,
                username: a.username,
                profile_picture: a.profile_picture
              })),
              tags: (tagMap.get(row.id) ?? []).map((t) => ({ id: t.id, name: t.name })),
              custom_fields: row.custom_fields ?? {},
              merged_into_contact_id: row.merged_into_contact_id,
              blocked_at: iso(row.blocked_at),
              blocked_reason: row.blocked_reason,
              blocked_by_user_id: row.blocked_by_user_id,
              opted_out_at: iso(row.opted_out_at),
              created_at: row.created_at.toISOString(),
              updated_at: row.updated_at.toISOString(),
              photo_path: row.photo_path,
              photo_mime_type: row.photo_mime_type,
              pictures: linked.map((a) => a.profile_picture).filter((p): p is string => p !== null && p !== "").reverse(),
              deleted: row.deleted_at !== null
            }
          })
        })

      const sortColumn: Record<string, string> = {
        id: "c.id",
        display_name: "lower(c.display_name)",
        company: "lower(c.company_name)",
        status: "c.status",
        created_at: "c.created_at"
      }

      const list: ContactsRepo["Service"]["list"] = (companyId, params, page, perPage) =>
        Effect.gen(function*() {
          const conditions: Array<Statement.Fragment> = [sql`c.company_id = ${companyId}`, sql`c.deleted_at IS NULL`]
          if (params.statusFilter.length > 0) conditions.push(sql`c.status IN ${sql.in([...params.statusFilter])}`)
          const search = params.search?.trim().toLowerCase() ?? ""
          if (search !== "") {
            const pattern = `%${likeEscape(search)}%`
            const digits = search.replace(/[^0-9]/g, "")
            conditions.push(sql`(
              c.search_text LIKE ${pattern}
              OR EXISTS (SELECT 1 FROM contact_emails e WHERE e.company_id = ${companyId} AND e.contact_id = c.id AND lower(e.email) LIKE ${pattern})
              OR EXISTS (SELECT 1 FROM contact_accounts a WHERE a.company_id = ${companyId} AND a.contact_id = c.id
                         AND (lower(a.username) LIKE ${pattern} OR lower(a.external_id) = ${search}))
              ${digits.length >= 3
                ? sql`OR EXISTS (SELECT 1 FROM contact_phones p WHERE p.company_id = ${companyId} AND p.contact_id = c.id
                                 AND ${phoneDigits(sql, "p.phone")} LIKE ${`%${digits}%`})`
                : sql``})`)
          }
          if (params.excludeLidOnly) {
            // Hidden: an unresolved @lid account (no number), no other account and no phone of its own.
            // Written as an anti-join over the few unresolved @lid accounts (a partial index), not a probe per contact.
            conditions.push(sql`NOT EXISTS (
              SELECT 1 FROM contact_accounts l
              WHERE l.company_id = ${companyId} AND l.contact_id = c.id AND l.external_id LIKE '%@lid' AND l.phone IS NULL
                AND NOT EXISTS (SELECT 1 FROM contact_accounts a WHERE a.company_id = ${companyId} AND a.contact_id = l.contact_id
                                AND NOT (a.external_id LIKE '%@lid' AND a.phone IS NULL))
                AND NOT EXISTS (SELECT 1 FROM contact_phones p WHERE p.company_id = ${companyId} AND p.contact_id = l.contact_id))`)
          }
          const where = sql.and(conditions)
          const dir = params.sortDir === "asc" ? sql`ASC` : sql`DESC`
          const column = sql.literal(sortColumn[params.sortBy ?? "created_at"])
          const nulls = params.sortBy === "company" ? (params.sortDir === "asc" ? sql`NULLS LAST` : sql`NULLS FIRST`) : sql``
          const [{ total }] = yield* sql<{ total: number }>`SELECT count(*)::int AS total FROM contacts c WHERE ${where}`
          const rows = yield* sql<ContactRow>`
            SELECT ${cols} FROM contacts c WHERE ${where}
            ORDER BY ${column} ${dir} ${nulls}, c.id ${dir}
            LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`
          return { items: yield* assemble(companyId, rows), total }
        }).pipe(Effect.orDie)

      const lookup = (companyId: CompanyId, q: string, limit: number) =>
        Effect.gen(function*() {
          const term = q.trim().toLowerCase()
          const pattern = `%${likeEscape(term.replace(/^@/, ""))}%`
          const digits = term.replace(/[^0-9]/g, "")
          const byDigits = digits.length >= 3
            ? sql`
              OR EXISTS (SELECT 1 FROM contact_phones p WHERE p.company_id = ${companyId} AND p.contact_id = c.id
                         AND ${phoneDigits(sql, "p.phone")} LIKE ${`%${digits}%`})
              OR EXISTS (SELECT 1 FROM contact_accounts a WHERE a.company_id = ${companyId} AND a.contact_id = c.id
                         AND a.phone IS NOT NULL AND ${phoneDigits(sql, "a.phone")} LIKE ${`%${digits}%`})`
            : sql``
          const rows = yield* sql<ContactRow>`
            SELECT ${cols} FROM contacts c
            WHERE c.company_id = ${companyId} AND c.deleted_at IS NULL AND (
              EXISTS (SELECT 1 FROM contact_accounts a WHERE a.company_id = ${companyId} AND a.contact_id = c.id
                      AND (lower(a.external_id) LIKE ${`%${likeEscape(term)}%`} OR lower(a.username) LIKE ${pattern}))
              ${byDigits})
            ORDER BY c.id DESC LIMIT ${limit}`
          return yield* assemble(companyId, rows)
        }).pipe(Effect.orDie)

      const find: ContactsRepo["Service"]["find"] = (companyId, id, options) =>
        Effect.gen(function*() {
          const live = options?.withMerged === true
            ? sql`(c.deleted_at IS NULL OR c.merged_into_contact_id IS NOT NULL)`
            : sql`c.deleted_at IS NULL`
          const rows = yield* sql<ContactRow>`
            SELECT ${cols} FROM contacts c WHERE c.company_id = ${companyId} AND c.id = ${id} AND ${live}
            ${options?.forUpdate === true ? sql`FOR UPDATE` : sql``}`
          return Option.fromNullishOr((yield* assemble(companyId, rows))[0])
        }).pipe(Effect.orDie)

      const exists = (companyId: CompanyId, id: number, forUpdate = false) =>
        sql<ContactRow>`
          SELECT ${cols} FROM contacts c WHERE c.company_id = ${companyId} AND c.id = ${id} AND c.deleted_at IS NULL
          ${forUpdate ? sql`FOR UPDATE` : sql``}`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])), Effect.orDie)

      const insert = (companyId: CompanyId, fields: ContactFields) =>
        sql<{ id: number }>`INSERT INTO contacts ${sql.insert({ company_id: companyId, ...fields })} RETURNING id`.pipe(
          Effect.map((rows) => rows[0].id),
          Effect.orDie
        )

      const update = (companyId: CompanyId, id: number, patch: Partial<ContactFields>) =>
        sql`UPDATE contacts SET ${sql.update({ ...patch, updated_at: new Date() })} WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const replacePhones = (companyId: CompanyId, id: number, phones: ReadonlyArray<PhoneValue>) =>
        Effect.gen(function*() {
          yield* sql`DELETE FROM contact_phones WHERE company_id = ${companyId} AND contact_id = ${id}`
          const rows = phones.map((p, position) => ({ company_id: companyId, contact_id: id, phone: p.phone, type: p.type, position }))
          if (Arr.isArrayNonEmpty(rows)) yield* sql`INSERT INTO contact_phones ${sql.insert(rows)}`
        }).pipe(Effect.orDie)

      const replaceEmails = (companyId: CompanyId, id: number, emails: ReadonlyArray<EmailValue>) =>
        Effect.gen(function*() {
          yield* sql`DELETE FROM contact_emails WHERE company_id = ${companyId} AND contact_id = ${id}`
          const rows = emails.map((e, position) => ({ company_id: companyId, contact_id: id, email: e.email, type: e.type, position }))
          if (Arr.isArrayNonEmpty(rows)) yield* sql`INSERT INTO contact_emails ${sql.insert(rows)}`
        }).pipe(Effect.orDie)

      const replaceAccounts: ContactsRepo["Service"]["replaceAccounts"] = (companyId, id, accounts) =>
        Effect.gen(function*() {
          const current = yield* sql<{ id: number; channel_type: string; external_id: string }>`
            SELECT id, channel_type, external_id FROM contact_accounts WHERE company_id = ${companyId} AND contact_id = ${id}`.pipe(Effect.orDie)
          const key = (type: string, externalId: string) => `${type}\u0000${externalId}`
          const wanted = new Set(accounts.map((a) => key(a.channel_type, a.external_id)))
          const gone = current.filter((row) => !wanted.has(key(row.channel_type, row.external_id))).map((row) => row.id)
          if (gone.length > 0) {
            yield* sql`DELETE FROM contact_accounts WHERE company_id = ${companyId} AND id IN ${sql.in(gone)}`.pipe(Effect.orDie)
          }
          const held = new Map(current.map((row) => [key(row.channel_type, row.external_id), row.id]))
          for (const [index, account] of accounts.entries()) {
            const existing = held.get(key(account.channel_type, account.external_id))
            if (existing !== undefined) {
              const patch: Record<string, string | null> = {}
              if (account.username !== undefined) patch.username = account.username
              if (account.profile_picture !== undefined) patch.profile_picture = account.profile_picture
              if (Object.keys(patch).length > 0) {
                yield* sql`UPDATE contact_accounts SET ${sql.update(patch)} WHERE company_id = ${companyId} AND id = ${existing}`.pipe(Effect.orDie)
              }
              continue
            }
            const inserted = yield* sql<{ id: number }>`
              INSERT INTO contact_accounts (company_id, contact_id, channel_type, external_id, username, profile_picture)
              VALUES (${companyId}, ${id}, ${account.channel_type}, ${account.external_id}, ${account.username ?? null},
                      ${account.profile_picture ?? null})
              ON CONFLICT (company_id, channel_type, external_id) DO NOTHING RETURNING id`.pipe(Effect.orDie)
            if (inserted.length === 0) return yield* Effect.fail({ conflictAt: index })
          }
        })

      const softDelete = (companyId: CompanyId, id: number) =>
        Effect.gen(function*() {
          const rows = yield* sql<{ id: number }>`
            UPDATE contacts SET deleted_at = now(), updated_at = now()
            WHERE company_id = ${companyId} AND id = ${id} AND deleted_at IS NULL RETURNING id`
          if (rows.length === 0) return false
          // The accounts are released so the same people can reach a new contact; history stays on this one.
          yield* sql`DELETE FROM contact_accounts WHERE company_id = ${companyId} AND contact_id = ${id}`
          return true
        }).pipe(Effect.orDie)

      const channelCounts = (companyId: CompanyId) =>
        sql<{ type: string; n: number }>`
          SELECT type, count(*)::int AS n FROM channels WHERE company_id = ${companyId} AND deleted_at IS NULL GROUP BY type`.pipe(
          Effect.map((rows) => new Map(rows.map((row) => [row.type, row.n]))),
          Effect.orDie
        )

      const resolve = (companyId: CompanyId, keys: ResolveKeys) =>
        Effect.gen(function*() {
          const byDigits = new Map<string, number>()
          if (keys.digits.length > 0) {
            // A number matches a contact's phone, an account's number, or a phone-addressed account id (wa_id).
            const rows = yield* sql<{ digits: string; contact_id: number }>`
              SELECT m.digits, min(m.contact_id)::int AS contact_id FROM (
                SELECT ${phoneDigits(sql, "p.phone")} AS digits, p.contact_id FROM contact_phones p
                WHERE p.company_id = ${companyId} AND ${phoneDigits(sql, "p.phone")} IN ${sql.in([...keys.digits])}
                UNION ALL
                SELECT ${phoneDigits(sql, "a.phone")}, a.contact_id FROM contact_accounts a
                WHERE a.company_id = ${companyId} AND a.phone IS NOT NULL AND ${phoneDigits(sql, "a.phone")} IN ${sql.in([...keys.digits])}
                UNION ALL
                SELECT a.external_id, a.contact_id FROM contact_accounts a
                WHERE a.company_id = ${companyId} AND a.channel_type IN ('msgr_a', 'msgr_a_business')
                  AND a.external_id IN ${sql.in([...keys.digits])}
              ) m JOIN contacts c ON c.id = m.contact_id AND c.company_id = ${companyId} AND c.deleted_at IS NULL
              GROUP BY m.digits`
            for (const row of rows) byDigits.set(row.digits, row.contact_id)
          }
          const accountConditions: Array<Statement.Fragment> = []
          if (keys.externalIds.length > 0) accountConditions.push(sql`a.external_id IN ${sql.in([...keys.externalIds])}`)
          if (keys.usernames.length > 0) accountConditions.push(sql`lower(a.username) IN ${sql.in([...keys.usernames])}`)
          const accounts = accountConditions.length === 0 ? [] : yield* sql<{ channel_type: string; external_id: string; username: string | null; contact_id: number }>`
            SELECT a.channel_type, a.external_id, a.username, a.contact_id FROM contact_accounts a
            JOIN contacts c ON c.id = a.contact_id AND c.company_id = ${companyId} AND c.deleted_at IS NULL
            WHERE a.company_id = ${companyId} AND ${sql.or(accountConditions)}
            ORDER BY a.contact_id`
          return { byDigits, accounts }
        }).pipe(Effect.orDie)

      const tagsOf = (companyId: CompanyId, tagIds: ReadonlyArray<number>) =>
        tagIds.length === 0
          ? Effect.succeed(new Set<number>())
          : sql<{ id: number }>`SELECT id FROM tags WHERE company_id = ${companyId} AND id IN ${sql.in([...tagIds])}`.pipe(
            Effect.map((rows) => new Set(rows.map((row) => row.id))),
            Effect.orDie
          )

      const replaceTags = (companyId: CompanyId, id: number, tagIds: ReadonlyArray<number>) =>
        Effect.gen(function*() {
          yield* sql`DELETE FROM contact_tags WHERE company_id = ${companyId} AND contact_id = ${id}`
          const rows = tagIds.map((tag_id) => ({ company_id: companyId, contact_id: id, tag_id }))
          if (Arr.isArrayNonEmpty(rows)) yield* sql`INSERT INTO contact_tags ${sql.insert(rows)}`
          yield* sql`UPDATE contacts SET updated_at = now() WHERE company_id = ${companyId} AND id = ${id}`
        }).pipe(Effect.orDie)

      const taggings = (companyId: CompanyId, ids: ReadonlyArray<number>, tagIds: ReadonlyArray<number>) =>
        sql<{ contacts: Array<{ id: number; tags: Array<TagRef> }> | null; tags: Array<TagRef> | null }>`
          SELECT
            (SELECT json_agg(json_build_object('id', c.id,
              'tags', COALESCE((SELECT json_agg(json_build_object('id', t.id, 'name', t.name) ORDER BY lower(t.name), t.id)
                FROM contact_tags ct JOIN tags t ON t.id = ct.tag_id AND t.company_id = ${companyId}
                WHERE ct.company_id = ${companyId} AND ct.contact_id = c.id), '[]'::json)))
              FROM contacts c WHERE c.company_id = ${companyId} AND c.id = ANY(${idArray(ids)}::bigint[]) AND c.deleted_at IS NULL) AS contacts,
            (SELECT json_agg(json_build_object('id', t.id, 'name', t.name))
              FROM tags t WHERE t.company_id = ${companyId} AND t.id = ANY(${idArray(tagIds)}::bigint[])) AS tags`.pipe(
          Effect.map(([row]): Taggings => ({
            contacts: new Map((row.contacts ?? []).map((c) => [Number(c.id), c.tags])),
            tags: new Map((row.tags ?? []).map((t) => [Number(t.id), t]))
          })),
          Effect.orDie
        )

      const changeTags = (companyId: CompanyId, pairs: ReadonlyArray<{ readonly id: number; readonly tagId: number }>, adding: boolean) => {
        const list = sql`ROWS FROM (jsonb_to_recordset(${JSON.stringify(pairs.map((p) => ({ contact_id: p.id, tag_id: p.tagId })))}::jsonb)
          AS (contact_id bigint, tag_id bigint)) AS p`
        return {
          along: sql`tag_change AS (${
            adding
              ? sql`
                INSERT INTO contact_tags (company_id, contact_id, tag_id)
                SELECT c.company_id, c.id, t.id FROM ${list}
                JOIN contacts c ON c.company_id = ${companyId} AND c.id = p.contact_id AND c.deleted_at IS NULL
                JOIN tags t ON t.company_id = c.company_id AND t.id = p.tag_id
                ON CONFLICT DO NOTHING RETURNING contact_id, tag_id`
              : sql`
                DELETE FROM contact_tags ct USING ${list}
                WHERE ct.company_id = ${companyId} AND ct.contact_id = p.contact_id AND ct.tag_id = p.tag_id
                RETURNING ct.contact_id, ct.tag_id`
          }), tag_touch AS (
            UPDATE contacts SET updated_at = now() WHERE company_id = ${companyId} AND id IN (SELECT contact_id FROM tag_change))`,
          changedFor: sql`EXISTS (SELECT 1 FROM tag_change x WHERE x.contact_id = (v.payload->>'contact_id')::bigint
            AND (v.key <> 'tag.added' OR x.tag_id = (v.payload->>'tag_id')::bigint))`
        }
      }

      const mergeCounts = (companyId: CompanyId, sourceId: number, targetId: number) =>
        sql<MergeCounts>`
          SELECT
            (SELECT count(*)::int FROM conversations WHERE company_id = ${companyId} AND contact_id = ${sourceId}) AS conversations,
            (SELECT count(*)::int FROM threads t JOIN conversations cv ON cv.id = t.conversation_id
              WHERE cv.company_id = ${companyId} AND cv.contact_id = ${sourceId}) AS threads,
            (SELECT count(*)::int FROM messages m JOIN conversations cv ON cv.id = m.conversation_id
              WHERE cv.company_id = ${companyId} AND cv.contact_id = ${sourceId}) AS messages,
            (SELECT count(*)::int FROM contact_accounts WHERE company_id = ${companyId} AND contact_id = ${sourceId}) AS "contactAccounts",
            (SELECT count(*)::int FROM contact_tags s WHERE s.company_id = ${companyId} AND s.contact_id = ${sourceId}
              AND NOT EXISTS (SELECT 1 FROM contact_tags t WHERE t.contact_id = ${targetId} AND t.tag_id = s.tag_id)) AS tags,
            (SELECT count(DISTINCT ${phoneDigits(sql, "s.phone")})::int FROM contact_phones s WHERE s.company_id = ${companyId} AND s.contact_id = ${sourceId}
              AND NOT EXISTS (SELECT 1 FROM contact_phones t WHERE t.company_id = ${companyId} AND t.contact_id = ${targetId}
                              AND ${phoneDigits(sql, "t.phone")} = ${phoneDigits(sql, "s.phone")})) AS phones,
            (SELECT count(DISTINCT lower(s.email))::int FROM contact_emails s WHERE s.company_id = ${companyId} AND s.contact_id = ${sourceId}
              AND NOT EXISTS (SELECT 1 FROM contact_emails t WHERE t.company_id = ${companyId} AND t.contact_id = ${targetId}
                              AND lower(t.email) = lower(s.email))) AS emailes`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const merge = (companyId: CompanyId, sourceId: number, targetId: number) =>
        Effect.gen(function*() {
          const source = yield* sql<{ id: number; last_message_at: Date | null }>`
            SELECT id, last_message_at FROM conversations WHERE company_id = ${companyId} AND contact_id = ${sourceId} FOR UPDATE`
          const target = yield* sql<{ id: number }>`
            SELECT id FROM conversations WHERE company_id = ${companyId} AND contact_id = ${targetId} FOR UPDATE`
          if (source.length > 0 && target.length === 0) {
            yield* sql`UPDATE conversations SET contact_id = ${targetId}, updated_at = now() WHERE company_id = ${companyId} AND id = ${source[0].id}`
          } else if (source.length > 0) {
            // One conversation per contact: the source's threads and messages join the target's.
            const from = source[0].id
            const into = target[0].id
            yield* sql`UPDATE threads SET conversation_id = ${into}, updated_at = now() WHERE company_id = ${companyId} AND conversation_id = ${from}`
            yield* sql`UPDATE messages SET conversation_id = ${into} WHERE company_id = ${companyId} AND conversation_id = ${from}`
            yield* sql`SELECT conversation_refresh(${into})`
            yield* sql`
              UPDATE conversations SET last_message_at = GREATEST(last_message_at, ${source[0].last_message_at}::timestamptz), updated_at = now()
              WHERE company_id = ${companyId} AND id = ${into}`
            yield* sql`DELETE FROM conversations WHERE company_id = ${companyId} AND id = ${from}`
          }
          yield* sql`UPDATE contact_accounts SET contact_id = ${targetId} WHERE company_id = ${companyId} AND contact_id = ${sourceId}`
          yield* sql`
            INSERT INTO contact_tags (company_id, contact_id, tag_id)
            SELECT company_id, ${targetId}, tag_id FROM contact_tags WHERE company_id = ${companyId} AND contact_id = ${sourceId}
            ON CONFLICT DO NOTHING`
          yield* sql`DELETE FROM contact_tags WHERE company_id = ${companyId} AND contact_id = ${sourceId}`
          yield* sql`
            INSERT INTO contact_phones (company_id, contact_id, phone, type, position)
            SELECT DISTINCT ON (${phoneDigits(sql, "s.phone")}) s.company_id, ${targetId}, s.phone, s.type, 1000 + s.position
            FROM contact_phones s
            WHERE s.company_id = ${companyId} AND s.contact_id = ${sourceId}
              AND NOT EXISTS (SELECT 1 FROM contact_phones t WHERE t.company_id = ${companyId} AND t.contact_id = ${targetId}
                              AND ${phoneDigits(sql, "t.phone")} = ${phoneDigits(sql, "s.phone")})
            ORDER BY ${phoneDigits(sql, "s.phone")}, s.position`
          yield* sql`
            INSERT INTO contact_emails (company_id, contact_id, email, type, position)
            SELECT DISTINCT ON (lower(s.email)) s.company_id, ${targetId}, s.email, s.type, 1000 + s.position
            FROM contact_emails s
            WHERE s.company_id = ${companyId} AND s.contact_id = ${sourceId}
              AND NOT EXISTS (SELECT 1 FROM contact_emails t WHERE t.company_id = ${companyId} AND t.contact_id = ${targetId}
                              AND lower(t.email) = lower(s.email))
            ORDER BY lower(s.email), s.position`
          yield* sql`
            UPDATE call_permission_requests SET contact_id = ${targetId} WHERE company_id = ${companyId} AND contact_id = ${sourceId}`
          // The target keeps its own values; empty ones are filled from the source, and an opt-out is never lost.
          yield* sql`
            UPDATE contacts t SET
              first_name = COALESCE(t.first_name, s.first_name),
              last_name = COALESCE(t.last_name, s.last_name),
              company_name = COALESCE(t.company_name, s.company_name),
              photo_mime_type = CASE WHEN t.photo_path IS NULL THEN s.photo_mime_type ELSE t.photo_mime_type END,
              photo_path = COALESCE(t.photo_path, s.photo_path),
              opted_out_at = CASE WHEN t.opted_out_at IS NULL THEN s.opted_out_at
                                  WHEN s.opted_out_at IS NULL THEN t.opted_out_at
                                  ELSE LEAST(t.opted_out_at, s.opted_out_at) END,
              updated_at = now()
            FROM contacts s
            WHERE t.company_id = ${companyId} AND t.id = ${targetId} AND s.company_id = ${companyId} AND s.id = ${sourceId}`
          yield* sql`
            UPDATE contacts SET merged_into_contact_id = ${targetId}, updated_at = now()
            WHERE company_id = ${companyId} AND merged_into_contact_id = ${sourceId}`
          yield* sql`
            UPDATE contacts SET deleted_at = now(), merged_into_contact_id = ${targetId}, updated_at = now()
            WHERE company_id = ${companyId} AND id = ${sourceId}`
        }).pipe(Effect.orDie)

      const setOptOut = (companyId: CompanyId, id: number, optedOut: boolean) =>
        (optedOut
          ? sql<{ opted_out_at: Date | null }>`
              UPDATE contacts SET opted_out_at = now(), updated_at = now()
              WHERE company_id = ${companyId} AND id = ${id} AND deleted_at IS NULL AND opted_out_at IS NULL
              RETURNING opted_out_at`
          : sql<{ opted_out_at: Date | null }>`
              UPDATE contacts SET opted_out_at = NULL, updated_at = now()
              WHERE company_id = ${companyId} AND id = ${id} AND deleted_at IS NULL AND opted_out_at IS NOT NULL
              RETURNING opted_out_at`).pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => row.opted_out_at)),
          Effect.orDie
        )

      const setBlocked: ContactsRepo["Service"]["setBlocked"] = (companyId, id, block) =>
        (block !== null
          ? sql<ContactRow>`
              UPDATE contacts c SET blocked_at = now(), blocked_reason = ${block.reason}, blocked_by_user_id = ${block.userId},
                updated_at = now()
              WHERE c.company_id = ${companyId} AND c.id = ${id} AND c.deleted_at IS NULL AND c.blocked_at IS NULL
              RETURNING ${cols}`
          : sql<ContactRow>`
              UPDATE contacts c SET blocked_at = NULL, blocked_reason = NULL, blocked_by_user_id = NULL, updated_at = now()
              WHERE c.company_id = ${companyId} AND c.id = ${id} AND c.deleted_at IS NULL AND c.blocked_at IS NOT NULL
              RETURNING ${cols}`).pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])), Effect.orDie)

      const blockTargets = (companyId: CompanyId, id: number) =>
        sql<BlockTarget>`
          SELECT ch.id AS channel_id, ch.name AS channel_name, ch.type AS channel_type, ch.provider, ch.status, ch.credentials,
                 ch.settings, COALESCE(a.external_id, t.external_thread_id) AS recipient, t.last_inbound_at
          FROM conversations cv
          JOIN threads t ON t.conversation_id = cv.id AND t.company_id = ${companyId} AND NOT t.is_group
          JOIN channels ch ON ch.id = t.channel_id AND ch.company_id = ${companyId} AND ch.deleted_at IS NULL
          LEFT JOIN contact_accounts a ON a.id = t.contact_account_id AND a.company_id = ${companyId}
          WHERE cv.company_id = ${companyId} AND cv.contact_id = ${id}
            AND ch.type IN ('msgr_a', 'msgr_a_business')
          ORDER BY ch.id, t.id`.pipe(Effect.orDie)

      const mediaImage = (companyId: CompanyId, mediaId: number) =>
        sql<{ storage_path: string; mime_type: string }>`
          SELECT storage_path, mime_type FROM media WHERE company_id = ${companyId} AND id = ${mediaId} AND type = 'image'`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      return ContactsRepo.of({
        list,
        lookup,
        find,
        exists,
        insert,
        update,
        replacePhones,
        replaceEmails,
        replaceAccounts,
        softDelete,
        channelCounts,
        resolve,
        tagsOf,
        replaceTags,
        taggings,
        changeTags,
        mergeCounts,
        merge,
        setOptOut,
        setBlocked,
        blockTargets,
        mediaImage
      })
    })
  )
}

import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { type Definition, memberCount } from "./Compiler.ts"
import type { Condition, GroupLogic, Segment, SegmentType } from "./Domain.ts"

export interface SegmentRow {
  readonly id: number
  readonly company_id: number
  readonly name: string
  readonly slug: string
  readonly description: string
  readonly type: SegmentType
  readonly conditions: ReadonlyArray<Condition>
  readonly group_logic: GroupLogic
  readonly conditions_summary: string
  readonly estimated_count: number
  readonly created_at: Date
  readonly updated_at: Date
}

export interface SegmentFields {
  readonly name: string
  readonly slug: string
  readonly description: string
  readonly type: SegmentType
  readonly conditions: ReadonlyArray<Condition>
  readonly group_logic: GroupLogic
  readonly conditions_summary: string
}

export const toSegment = (row: SegmentRow, members: ReadonlyArray<number> | null): Segment => ({
  id: String(row.id),
  company_id: row.company_id,
  name: row.name,
  slug: row.slug,
  description: row.description,
  type: row.type,
  conditions: row.conditions,
  group_logic: row.group_logic,
  conditions_summary: row.conditions_summary,
  estimated_count: row.estimated_count,
  contacts_count: members === null ? null : members.length,
  members,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString()
})

/** Segments of one company and the members of static ones; every statement carries the company id. */
export class SegmentsRepo extends Context.Service<SegmentsRepo, {
  list(companyId: CompanyId, search: string | null, limit: number, offset: number): Effect.Effect<{ readonly rows: ReadonlyArray<SegmentRow>; readonly total: number }>
  find(companyId: CompanyId, id: number, forUpdate?: boolean): Effect.Effect<Option.Option<SegmentRow>>
  /** Live members' contact ids per static segment, ascending. */
  membersOf(companyId: CompanyId, segmentIds: ReadonlyArray<number>): Effect.Effect<ReadonlyMap<number, ReadonlyArray<number>>>
  /** Slugs of the company equal to `base` or `base-<n>`, other than the segment `except`'s. */
  slugsLike(companyId: CompanyId, base: string, except: number | null): Effect.Effect<ReadonlySet<string>>
  /**
   * Holds the company's segment slugs until the transaction ends, so writers that pick a free slug and
   * store it come one after the other.
   */
  lockSlugs(companyId: CompanyId): Effect.Effect<void>
  /** None when the slug is taken (the unique index decides, races included). */
  insert(companyId: CompanyId, fields: SegmentFields): Effect.Effect<Option.Option<number>>
  /** None when the slug is taken. */
  update(companyId: CompanyId, id: number, fields: SegmentFields): Effect.Effect<Option.Option<void>>
  setEstimate(companyId: CompanyId, id: number, count: number, summary?: string): Effect.Effect<void>
  delete(companyId: CompanyId, id: number): Effect.Effect<boolean>
  touch(companyId: CompanyId, id: number): Effect.Effect<void>
  addMembers(companyId: CompanyId, id: number, contactIds: ReadonlyArray<number>): Effect.Effect<void>
  removeMembers(companyId: CompanyId, id: number, contactIds: ReadonlyArray<number>): Effect.Effect<void>
  /** The given ids that are live contacts of the company. */
  liveContacts(companyId: CompanyId, contactIds: ReadonlyArray<number>): Effect.Effect<ReadonlySet<number>>
  tagNames(companyId: CompanyId, ids: ReadonlyArray<number>): Effect.Effect<ReadonlyMap<number, string>>
  /** Names of the company's (not deleted) channels among `ids`. */
  channelNames(companyId: CompanyId, ids: ReadonlyArray<number>): Effect.Effect<ReadonlyMap<number, string>>
  /** Runs the compiled count (unnamed statement, so it is planned for this company's sizes). */
  count(companyId: CompanyId, definition: Definition): Effect.Effect<number>
}>()("crm/segments/SegmentsRepo") {
  static readonly layer = Layer.effect(
    SegmentsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, company_id, name, slug, description, type, conditions, group_logic, conditions_summary,
        estimated_count, created_at, updated_at`

      const list = (companyId: CompanyId, search: string | null, limit: number, offset: number) =>
        Effect.gen(function*() {
          const pattern = search === null ? null : `%${search.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`
          const where = pattern === null
            ? sql`company_id = ${companyId}`
            : sql`company_id = ${companyId} AND (lower(name) LIKE ${pattern} OR lower(description) LIKE ${pattern})`
          const rows = yield* sql<SegmentRow>`
            SELECT ${columns} FROM segments WHERE ${where}
            ORDER BY created_at DESC, id DESC LIMIT ${limit} OFFSET ${offset}`
          const total = yield* sql<{ count: number }>`SELECT count(*)::int AS count FROM segments WHERE ${where}`
          return { rows, total: total[0].count }
        }).pipe(Effect.orDie)

      const find = (companyId: CompanyId, id: number, forUpdate = false) =>
        sql<SegmentRow>`
          SELECT ${columns} FROM segments WHERE company_id = ${companyId} AND id = ${id}
          ${forUpdate ? sql`FOR UPDATE` : sql``}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const membersOf = (companyId: CompanyId, segmentIds: ReadonlyArray<number>) =>
        segmentIds.length === 0
          ? Effect.succeed(new Map<number, ReadonlyArray<number>>())
          : sql<{ segment_id: number; contact_id: number }>`
              SELECT m.segment_id, m.contact_id FROM segment_members m
              JOIN contacts c ON c.id = m.contact_id AND c.company_id = ${companyId} AND c.deleted_at IS NULL
              WHERE m.company_id = ${companyId} AND ${sql.in("m.segment_id", segmentIds)}
              ORDER BY m.segment_id, m.contact_id`.pipe(
              Effect.map((rows) => {
                const bySegment = new Map<number, Array<number>>(segmentIds.map((id) => [id, []]))
                for (const row of rows) bySegment.get(row.segment_id)?.push(row.contact_id)
                return bySegment as ReadonlyMap<number, ReadonlyArray<number>>
              }),
              Effect.orDie
            )

      const slugsLike = (companyId: CompanyId, base: string, except: number | null) =>
        sql<{ slug: string }>`
          SELECT slug FROM segments
          WHERE company_id = ${companyId} AND (slug = ${base} OR slug LIKE ${`${base.replace(/[\\%_]/g, (c) => `\\${c}`)}-%`})
            AND id IS DISTINCT FROM ${except}`.pipe(
          Effect.map((rows) => new Set(rows.map((row) => row.slug))),
          Effect.orDie
        )

      const lockSlugs = (companyId: CompanyId) =>
        sql`SELECT pg_advisory_xact_lock(hashtext('segment_slugs'), hashtext(${String(companyId)}))`.pipe(Effect.asVoid, Effect.orDie)

      const insert = (companyId: CompanyId, fields: SegmentFields) =>
        sql<{ id: number }>`
          INSERT INTO segments (company_id, name, slug, description, type, conditions, group_logic, conditions_summary)
          VALUES (${companyId}, ${fields.name}, ${fields.slug}, ${fields.description}, ${fields.type},
            ${JSON.stringify(fields.conditions)}::jsonb, ${fields.group_logic}, ${fields.conditions_summary})
          ON CONFLICT (company_id, slug) DO NOTHING RETURNING id`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => row.id)),
          Effect.orDie
        )

      const update = (companyId: CompanyId, id: number, fields: SegmentFields) =>
        sql`
          UPDATE segments SET name = ${fields.name}, slug = ${fields.slug}, description = ${fields.description},
            conditions = ${JSON.stringify(fields.conditions)}::jsonb, group_logic = ${fields.group_logic},
            conditions_summary = ${fields.conditions_summary}, updated_at = now()
          WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.as(Option.some<void>(undefined)),
          Effect.catchReason("SqlError", "UniqueViolation", () => Effect.succeed(Option.none<void>())),
          Effect.orDie
        )

      const setEstimate = (companyId: CompanyId, id: number, count: number, summary?: string) =>
        sql`
          UPDATE segments SET estimated_count = ${count}
            ${summary === undefined ? sql`` : sql`, conditions_summary = ${summary}`}
          WHERE company_id = ${companyId} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

      const remove = (companyId: CompanyId, id: number) =>
        sql<{ id: number }>`DELETE FROM segments WHERE company_id = ${companyId} AND id = ${id} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const touch = (companyId: CompanyId, id: number) =>
        sql`UPDATE segments SET updated_at = now() WHERE company_id = ${companyId} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

      const addMembers = (companyId: CompanyId, id: number, contactIds: ReadonlyArray<number>) =>
        contactIds.length === 0 ? Effect.void : sql`
          INSERT INTO segment_members (company_id, segment_id, contact_id)
          SELECT ${companyId}, ${id}, c.id FROM contacts c
          WHERE c.company_id = ${companyId} AND c.deleted_at IS NULL AND ${sql.in("c.id", contactIds)}
          ON CONFLICT (segment_id, contact_id) DO NOTHING`.pipe(Effect.asVoid, Effect.orDie)

      const removeMembers = (companyId: CompanyId, id: number, contactIds: ReadonlyArray<number>) =>
        contactIds.length === 0 ? Effect.void : sql`
          DELETE FROM segment_members
          WHERE company_id = ${companyId} AND segment_id = ${id} AND ${sql.in("contact_id", contactIds)}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const liveContacts = (companyId: CompanyId, contactIds: ReadonlyArray<number>) =>
        contactIds.length === 0
          ? Effect.succeed(new Set<number>())
          : sql<{ id: number }>`
              SELECT id FROM contacts WHERE company_id = ${companyId} AND deleted_at IS NULL AND ${sql.in("id", contactIds)}`.pipe(
              Effect.map((rows) => new Set(rows.map((row) => row.id))),
              Effect.orDie
            )

      const names = (table: "tags" | "channels") => (companyId: CompanyId, ids: ReadonlyArray<number>) =>
        ids.length === 0
          ? Effect.succeed(new Map<number, string>())
          : sql<{ id: number; name: string }>`
              SELECT id, name FROM ${sql(table)}
              WHERE company_id = ${companyId} AND ${sql.in("id", ids)}
                ${table === "channels" ? sql`AND deleted_at IS NULL` : sql``}`.pipe(
              Effect.map((rows) => new Map(rows.map((row) => [row.id, row.name] as const))),
              Effect.orDie
            )

      const count = (companyId: CompanyId, definition: Definition) =>
        Effect.flatMap(memberCount(companyId, definition), (statement) => statement.unprepared).pipe(
          Effect.map((rows) => rows[0].count),
          Effect.provideService(SqlClient.SqlClient, sql),
          Effect.orDie
        )

      return SegmentsRepo.of({
        list,
        find,
        membersOf,
        slugsLike,
        lockSlugs,
        insert,
        update,
        setEstimate,
        delete: remove,
        addMembers,
        removeMembers,
        liveContacts,
        tagNames: names("tags"),
        channelNames: names("channels"),
        touch,
        count
      })
    })
  )
}

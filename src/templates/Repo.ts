import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import type { ChannelType, ProviderKind } from "../providers/Domain.ts"
import type { Button, MetaStatus, Parameter, TemplateStatus } from "./Domain.ts"

export interface GroupRow {
  readonly id: number
  readonly company_id: number
  readonly name: string
  readonly slug: string
  readonly status: TemplateStatus
  readonly created_at: Date
  readonly updated_at: Date
}

/** What one language version holds (the same on every channel of that language). */
export interface Content {
  readonly category: string
  readonly body: string
  readonly parameters: ReadonlyArray<Parameter>
  readonly header_enabled: boolean
  readonly header_type: string | null
  readonly header_text: string | null
  readonly footer_enabled: boolean
  readonly footer_text: string | null
  readonly buttons_enabled: boolean
  readonly buttons: ReadonlyArray<Button>
  readonly labels: ReadonlyArray<string>
}

export interface InstanceRow extends Content {
  readonly id: number
  readonly company_id: number
  readonly group_id: number
  readonly channel_id: number | null
  readonly channel_name: string | null
  readonly channel_account_name: string | null
  readonly channel_status: "connected" | "disconnected" | null
  readonly channel_type: ChannelType | null
  readonly provider: ProviderKind | null
  readonly credentials: Uint8Array | null
  readonly settings: Record<string, unknown> | null
  readonly language: string
  readonly meta_status: MetaStatus
  readonly meta_status_reason: string | null
  readonly external_id: string | null
  readonly last_synced_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

export interface BusinessChannel {
  readonly id: number
  readonly name: string
  readonly account_name: string | null
  readonly status: "connected" | "disconnected"
  readonly type: ChannelType
  readonly provider: ProviderKind
  readonly credentials: Uint8Array | null
  readonly settings: Record<string, unknown>
}

export interface EventRow {
  readonly id: number
  readonly type: string
  readonly template_id: number | null
  readonly language: string | null
  readonly meta_status: string | null
  readonly reason: string | null
  readonly metadata: Record<string, unknown>
  readonly channel_id: number | null
  readonly channel_name: string | null
  readonly channel_account_name: string | null
  readonly actor_id: number | null
  readonly actor_name: string | null
  readonly created_at: Date
}

export interface NewEvent {
  readonly groupId: number
  readonly type: string
  readonly templateId: number | null
  readonly channelId: number | null
  readonly metaStatus: string | null
  readonly reason: string | null
  readonly metadata: Record<string, unknown>
  readonly actorUserId: number | null
}

export interface ListFilters {
  readonly status: TemplateStatus | undefined
  readonly language: string | undefined
  readonly search: string | undefined
  readonly sortBy: "name" | "created_at" | "updated_at"
  readonly sortDir: "asc" | "desc"
  readonly limit: number
  readonly offset: number
}

export interface Moderation {
  readonly metaStatus: MetaStatus
  readonly reason: string | null
  readonly externalId?: string | null
  readonly synced: boolean
}

const json = (value: unknown) => JSON.stringify(value)

/** Template groups, their instances and events; every statement carries the company id. */
export class TemplatesRepo extends Context.Service<TemplatesRepo, {
  /** The group an id names: a group id, or an instance id (then also that instance). */
  resolve(companyId: CompanyId, id: number): Effect.Effect<Option.Option<{ readonly group: GroupRow; readonly instanceId: number | null }>>
  /** The group row, locked until the transaction ends. */
  lockGroup(companyId: CompanyId, groupId: number): Effect.Effect<Option.Option<GroupRow>>
  groups(companyId: CompanyId, ids: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<GroupRow>>
  /** Instances of these groups, oldest first, with their channel. */
  instances(companyId: CompanyId, groupIds: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<InstanceRow>>
  instance(companyId: CompanyId, id: number): Effect.Effect<Option.Option<InstanceRow>>
  /** Template messages sent per instance. */
  usesCounts(companyId: CompanyId, instanceIds: ReadonlyArray<number>): Effect.Effect<ReadonlyMap<number, number>>
  list(companyId: CompanyId, filters: ListFilters): Effect.Effect<{ readonly ids: ReadonlyArray<number>; readonly total: number }>
  facets(companyId: CompanyId, filters: ListFilters): Effect.Effect<{
    readonly statuses: Record<string, number>
    readonly languages: Record<string, number>
    readonly total: number
  }>
  slugsLike(companyId: CompanyId, base: string): Effect.Effect<ReadonlySet<string>>
  /** None when the slug is taken. */
  insertGroup(companyId: CompanyId, name: string, slug: string): Effect.Effect<Option.Option<number>>
  insertInstance(companyId: CompanyId, groupId: number, channelId: number | null, language: string, content: Content): Effect.Effect<number>
  updateGroup(companyId: CompanyId, groupId: number, change: { readonly name?: string; readonly status?: TemplateStatus }): Effect.Effect<void>
  /** Rewrites every instance of one language; those already reviewed go back to `local` (they must be submitted again). */
  updateContent(companyId: CompanyId, groupId: number, language: string, content: Content): Effect.Effect<void>
  setChannel(companyId: CompanyId, instanceId: number, channelId: number): Effect.Effect<void>
  setModeration(companyId: CompanyId, instanceId: number, moderation: Moderation): Effect.Effect<void>
  deleteInstances(companyId: CompanyId, ids: ReadonlyArray<number>): Effect.Effect<void>
  deleteGroup(companyId: CompanyId, groupId: number): Effect.Effect<void>
  insertEvent(companyId: CompanyId, event: NewEvent): Effect.Effect<void>
  events(companyId: CompanyId, groupId: number): Effect.Effect<ReadonlyArray<EventRow>>
  /** The company's live msgr_a_business channels (all of them, or these ids). */
  businessChannels(companyId: CompanyId, ids?: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<BusinessChannel>>
  /** Instances the provider knows (submitted, on a live channel), of one channel or all: what a sync asks about. */
  submitted(companyId: CompanyId, channelId?: number): Effect.Effect<ReadonlyArray<InstanceRow>>
  /** The instance a provider notification names, on one channel. */
  byExternal(companyId: CompanyId, channelId: number, externalId: string): Effect.Effect<Option.Option<InstanceRow>>
}>()("crm/templates/TemplatesRepo") {
  static readonly layer = Layer.effect(
    TemplatesRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      const groupColumns = sql`g.id, g.company_id, g.name, g.slug, g.status, g.created_at, g.updated_at`
      const instanceSelect = (companyId: CompanyId) => sql`
        SELECT t.id, t.company_id, t.group_id, t.channel_id, c.name AS channel_name, c.account_name AS channel_account_name,
          c.status AS channel_status, c.type AS channel_type, c.provider, c.credentials, c.settings,
          t.language, t.category, t.body, t.parameters, t.header_enabled, t.header_type, t.header_text,
          t.footer_enabled, t.footer_text, t.buttons_enabled, t.buttons, t.labels, t.meta_status, t.meta_status_reason,
          t.external_id, t.last_synced_at, t.created_at, t.updated_at
        FROM templates t
        LEFT JOIN channels c ON c.id = t.channel_id AND c.company_id = ${companyId} AND c.deleted_at IS NULL
        WHERE t.company_id = ${companyId}`

      const one = <A>(rows: ReadonlyArray<A>) => Option.fromNullishOr(rows[0])

      const resolve = (companyId: CompanyId, id: number) =>
        sql<GroupRow & { instance_id: number | null }>`
          SELECT ${groupColumns}, t.id AS instance_id
          FROM template_groups g LEFT JOIN templates t ON t.company_id = ${companyId} AND t.group_id = g.id AND t.id = ${id}
          WHERE g.company_id = ${companyId} AND (g.id = ${id} OR t.id IS NOT NULL)`.pipe(
          Effect.map((rows) => Option.map(one(rows), ({ instance_id, ...group }) => ({ group, instanceId: instance_id }))),
          Effect.orDie
        )

      const lockGroup = (companyId: CompanyId, groupId: number) =>
        sql<GroupRow>`SELECT ${groupColumns} FROM template_groups g WHERE g.company_id = ${companyId} AND g.id = ${groupId} FOR UPDATE`.pipe(
          Effect.map(one),
          Effect.orDie
        )

      const groups = (companyId: CompanyId, ids: ReadonlyArray<number>) =>
        ids.length === 0
          ? Effect.succeed([])
          : sql<GroupRow>`SELECT ${groupColumns} FROM template_groups g WHERE g.company_id = ${companyId} AND ${sql.in("g.id", ids)}`
            .pipe(Effect.orDie)

      const instances = (companyId: CompanyId, groupIds: ReadonlyArray<number>) =>
        groupIds.length === 0
          ? Effect.succeed([])
          : sql<InstanceRow>`${instanceSelect(companyId)} AND ${sql.in("t.group_id", groupIds)} ORDER BY t.id`.pipe(Effect.orDie)

      const instance = (companyId: CompanyId, id: number) =>
        sql<InstanceRow>`${instanceSelect(companyId)} AND t.id = ${id}`.pipe(Effect.map(one), Effect.orDie)

      const usesCounts = (companyId: CompanyId, ids: ReadonlyArray<number>) =>
        ids.length === 0
          ? Effect.succeed(new Map<number, number>())
          : sql<{ id: string; n: number }>`
            SELECT metadata->'template'->>'id' AS id, count(*)::int AS n FROM messages
            WHERE company_id = ${companyId} AND message_type = 'template' AND direction = 'outbound'
              AND metadata->'template'->>'id' IN ${sql.in(ids.map(String))}
            GROUP BY 1`.pipe(
            Effect.map((rows) => new Map(rows.map((r) => [Number(r.id), r.n]))),
            Effect.orDie
          )

      const where = (companyId: CompanyId, f: ListFilters) => {
        const parts = [sql`g.company_id = ${companyId}`]
        if (f.status !== undefined) parts.push(sql`g.status = ${f.status}`)
        if (f.language !== undefined) {
          parts.push(sql`EXISTS (SELECT 1 FROM templates t WHERE t.company_id = ${companyId} AND t.group_id = g.id AND t.language = ${f.language})`)
        }
        if (f.search !== undefined) {
          const like = `%${f.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
          parts.push(sql`(g.name ILIKE ${like} OR g.slug ILIKE ${like} OR EXISTS (
            SELECT 1 FROM templates t WHERE t.company_id = ${companyId} AND t.group_id = g.id AND t.body ILIKE ${like}))`)
        }
        return sql.and(parts)
      }

      const list = (companyId: CompanyId, f: ListFilters) =>
        Effect.gen(function*() {
          const order = f.sortBy === "name" ? sql`lower(g.name)` : f.sortBy === "updated_at" ? sql`g.updated_at` : sql`g.created_at`
          const dir = f.sortDir === "asc" ? sql`ASC` : sql`DESC`
          const rows = yield* sql<{ id: number; total: number }>`
            SELECT g.id, count(*) OVER ()::int AS total FROM template_groups g WHERE ${where(companyId, f)}
            ORDER BY ${order} ${dir}, g.id ${dir} LIMIT ${f.limit} OFFSET ${f.offset}`
          if (rows.length > 0 || f.offset === 0) return { ids: rows.map((r) => r.id), total: rows[0]?.total ?? 0 }
          const [{ total }] = yield* sql<{ total: number }>`SELECT count(*)::int AS total FROM template_groups g WHERE ${where(companyId, f)}`
          return { ids: [], total }
        }).pipe(Effect.orDie)

      const facets = (companyId: CompanyId, f: ListFilters) =>
        Effect.gen(function*() {
          const statuses = yield* sql<{ key: string; n: number }>`
            SELECT g.status AS key, count(*)::int AS n FROM template_groups g WHERE ${where(companyId, { ...f, status: undefined })} GROUP BY 1`
          const languages = yield* sql<{ key: string; n: number }>`
            SELECT t.language AS key, count(DISTINCT g.id)::int AS n
            FROM template_groups g JOIN templates t ON t.company_id = ${companyId} AND t.group_id = g.id
            WHERE ${where(companyId, { ...f, language: undefined })} GROUP BY 1`
          const [{ total }] = yield* sql<{ total: number }>`SELECT count(*)::int AS total FROM template_groups g WHERE ${where(companyId, f)}`
          const record = (rows: ReadonlyArray<{ key: string; n: number }>) => Object.fromEntries(rows.map((r) => [r.key, r.n]))
          return { statuses: record(statuses), languages: record(languages), total }
        }).pipe(Effect.orDie)

      const slugsLike = (companyId: CompanyId, base: string) =>
        sql<{ slug: string }>`
          SELECT slug FROM template_groups WHERE company_id = ${companyId} AND (slug = ${base} OR slug ~ ${`^${base}_[0-9]+$`})`.pipe(
          Effect.map((rows) => new Set(rows.map((r) => r.slug))),
          Effect.orDie
        )

      const insertGroup = (companyId: CompanyId, name: string, slug: string) =>
        sql<{ id: number }>`
          INSERT INTO template_groups (company_id, name, slug) VALUES (${companyId}, ${name}, ${slug})
          ON CONFLICT (company_id, slug) DO NOTHING RETURNING id`.pipe(
          Effect.map((rows) => Option.map(one(rows), (r) => r.id)),
          Effect.orDie
        )

      const contentValues = (c: Content) => ({
        category: c.category,
        body: c.body,
        parameters: json(c.parameters),
        header_enabled: c.header_enabled,
        header_type: c.header_type,
        header_text: c.header_text,
        footer_enabled: c.footer_enabled,
        footer_text: c.footer_text,
        buttons_enabled: c.buttons_enabled,
        buttons: json(c.buttons),
        labels: json(c.labels)
      })

      const insertInstance = (companyId: CompanyId, groupId: number, channelId: number | null, language: string, content: Content) =>
        sql<{ id: number }>`
          INSERT INTO templates ${sql.insert({ company_id: companyId, group_id: groupId, channel_id: channelId, language, ...contentValues(content) })}
          RETURNING id`.pipe(Effect.map((rows) => rows[0].id), Effect.orDie)

      const updateGroup = (companyId: CompanyId, groupId: number, change: { readonly name?: string; readonly status?: TemplateStatus }) =>
        sql`
          UPDATE template_groups SET name = COALESCE(${change.name ?? null}, name), status = COALESCE(${change.status ?? null}, status),
            updated_at = now()
          WHERE company_id = ${companyId} AND id = ${groupId}`.pipe(Effect.asVoid, Effect.orDie)

      const updateContent = (companyId: CompanyId, groupId: number, language: string, content: Content) =>
        sql`
          UPDATE templates SET ${sql.update({ ...contentValues(content) })},
            meta_status = 'local', meta_status_reason = NULL, updated_at = now()
          WHERE company_id = ${companyId} AND group_id = ${groupId} AND language = ${language}`.pipe(Effect.asVoid, Effect.orDie)

      const setChannel = (companyId: CompanyId, instanceId: number, channelId: number) =>
        sql`UPDATE templates SET channel_id = ${channelId}, updated_at = now() WHERE company_id = ${companyId} AND id = ${instanceId}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const setModeration = (companyId: CompanyId, instanceId: number, m: Moderation) =>
        sql`
          UPDATE templates SET meta_status = ${m.metaStatus}, meta_status_reason = ${m.reason},
            external_id = ${m.externalId === undefined ? sql`external_id` : m.externalId},
            last_synced_at = ${m.synced ? sql`now()` : sql`last_synced_at`}, updated_at = now()
          WHERE company_id = ${companyId} AND id = ${instanceId}`.pipe(Effect.asVoid, Effect.orDie)

      const deleteInstances = (companyId: CompanyId, ids: ReadonlyArray<number>) =>
        ids.length === 0
          ? Effect.void
          : sql`DELETE FROM templates WHERE company_id = ${companyId} AND ${sql.in("id", ids)}`.pipe(Effect.asVoid, Effect.orDie)

      const deleteGroup = (companyId: CompanyId, groupId: number) =>
        sql`DELETE FROM template_groups WHERE company_id = ${companyId} AND id = ${groupId}`.pipe(Effect.asVoid, Effect.orDie)

      const insertEvent = (companyId: CompanyId, e: NewEvent) =>
        sql`
          INSERT INTO template_events (company_id, group_id, template_id, channel_id, type, meta_status, reason, metadata, actor_user_id)
          VALUES (${companyId}, ${e.groupId}, ${e.templateId}, ${e.channelId}, ${e.type}, ${e.metaStatus}, ${e.reason},
            ${json(e.metadata)}::jsonb, ${e.actorUserId})`.pipe(Effect.asVoid, Effect.orDie)

      const events = (companyId: CompanyId, groupId: number) =>
        sql<EventRow>`
          SELECT e.id, e.type, e.template_id, t.language, e.meta_status, e.reason, e.metadata, e.channel_id,
            c.name AS channel_name, c.account_name AS channel_account_name, u.id AS actor_id, u.name AS actor_name, e.created_at
          FROM template_events e
          LEFT JOIN templates t ON t.company_id = ${companyId} AND t.id = e.template_id
          LEFT JOIN channels c ON c.company_id = ${companyId} AND c.id = e.channel_id
          LEFT JOIN users u ON u.id = e.actor_user_id
          WHERE e.company_id = ${companyId} AND e.group_id = ${groupId}
          ORDER BY e.id DESC`.pipe(Effect.orDie)

      const businessChannels = (companyId: CompanyId, ids?: ReadonlyArray<number>) =>
        ids !== undefined && ids.length === 0
          ? Effect.succeed([])
          : sql<BusinessChannel>`
            SELECT id, name, account_name, status, type, provider, credentials, settings FROM channels
            WHERE company_id = ${companyId} AND deleted_at IS NULL AND type = 'msgr_a_business'
              ${ids === undefined ? sql`` : sql`AND ${sql.in("id", ids)}`}
            ORDER BY id`.pipe(Effect.orDie)

      const submitted = (companyId: CompanyId, channelId?: number) =>
        sql<InstanceRow>`
          ${instanceSelect(companyId)} AND t.external_id IS NOT NULL AND c.id IS NOT NULL
            ${channelId === undefined ? sql`` : sql`AND t.channel_id = ${channelId}`}
          ORDER BY t.channel_id, t.id`.pipe(Effect.orDie)

      const byExternal = (companyId: CompanyId, channelId: number, externalId: string) =>
        sql<InstanceRow>`${instanceSelect(companyId)} AND t.channel_id = ${channelId} AND t.external_id = ${externalId}`.pipe(
          Effect.map(one),
          Effect.orDie
        )

      return TemplatesRepo.of({
        resolve,
        lockGroup,
        groups,
        instances,
        instance,
        usesCounts,
        list,
        facets,
        slugsLike,
        insertGroup,
        insertInstance,
        updateGroup,
        updateContent,
        setChannel,
        setModeration,
        deleteInstances,
        deleteGroup,
        insertEvent,
        events,
        businessChannels,
        submitted,
        byExternal
      })
    })
  )
}

import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { iso } from "./Access.ts"
import type { Activity, ActivityType } from "./Domain.ts"

interface ActivityRow {
  readonly id: number
  readonly deal_id: number
  readonly type: ActivityType
  readonly actor_user_id: number | null
  readonly body: string | null
  readonly metadata: Record<string, unknown> | null
  readonly created_at: Date
  readonly actor_name: string | null
  readonly actor_lastname: string | null
  readonly actor_exists: boolean
}

const toActivity = (row: ActivityRow): Activity => ({
  id: row.id,
  deal_id: row.deal_id,
  type: row.type,
  actor_user_id: row.actor_user_id,
  body: row.body,
  metadata: row.metadata,
  created_at: iso(row.created_at)!,
  actor: row.actor_user_id !== null && row.actor_exists
    ? { id: row.actor_user_id, name: row.actor_name ?? "", lastname: row.actor_lastname }
    : null
})

export interface NewActivity {
  readonly type: ActivityType
  /** null for system entries (automations, auto-creation, connectors). */
  readonly actorUserId: number | null
  readonly body?: string | null
  readonly metadata?: Record<string, unknown> | null
}

/** The deal timeline: entries are only ever inserted (the table refuses UPDATE and DELETE). */
export class TimelineRepo extends Context.Service<TimelineRepo, {
  add(companyId: CompanyId, dealId: number, entry: NewActivity): Effect.Effect<number>
  find(companyId: CompanyId, id: number): Effect.Effect<Option.Option<Activity>>
  page(companyId: CompanyId, dealId: number, limit: number, offset: number): Effect.Effect<{ readonly items: ReadonlyArray<Activity>; readonly total: number }>
}>()("crm/deals/TimelineRepo") {
  static readonly layer = Layer.effect(
    TimelineRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const select = sql`
        SELECT a.id, a.deal_id, a.type, a.actor_user_id, a.body, a.metadata, a.created_at,
          u.name AS actor_name, u.lastname AS actor_lastname, u.id IS NOT NULL AS actor_exists
        FROM deal_activities a LEFT JOIN users u ON u.id = a.actor_user_id`

      const add = (companyId: CompanyId, dealId: number, entry: NewActivity) =>
        sql<{ id: number }>`
          INSERT INTO deal_activities (company_id, deal_id, type, actor_user_id, body, metadata)
          VALUES (${companyId}, ${dealId}, ${entry.type}, ${entry.actorUserId}, ${entry.body ?? null},
            ${entry.metadata == null ? null : JSON.stringify(entry.metadata)}::jsonb)
          RETURNING id`.pipe(Effect.map((rows) => rows[0].id), Effect.orDie)

      const find = (companyId: CompanyId, id: number) =>
        sql<ActivityRow>`${select} WHERE a.company_id = ${companyId} AND a.id = ${id}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toActivity)),
          Effect.orDie
        )

      const page = (companyId: CompanyId, dealId: number, limit: number, offset: number) =>
        Effect.all([
          sql<ActivityRow>`${select} WHERE a.company_id = ${companyId} AND a.deal_id = ${dealId} ORDER BY a.id DESC LIMIT ${limit} OFFSET ${offset}`,
          sql<{ n: number }>`SELECT count(*)::int AS n FROM deal_activities WHERE company_id = ${companyId} AND deal_id = ${dealId}`
        ]).pipe(
          Effect.map(([rows, counted]) => ({ items: rows.map(toActivity), total: counted[0].n })),
          Effect.orDie
        )

      return TimelineRepo.of({ add, find, page })
    })
  )
}

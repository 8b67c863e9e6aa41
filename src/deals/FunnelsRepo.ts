import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { iso } from "./Access.ts"
import type { DealType, Funnel, LostReason, Stage, StageType } from "./Domain.ts"

interface FunnelRow {
  readonly id: number
  readonly company_id: number
  readonly name: string
  readonly is_default: boolean
  readonly order: number
}

interface StageRow {
  readonly id: number
  readonly funnel_id: number
  readonly name: string
  readonly type: StageType
  readonly order: number
}

interface LostReasonRow {
  readonly id: number
  readonly company_id: number
  readonly name: string
  readonly is_active: boolean
  readonly order: number
  readonly created_at: Date
  readonly updated_at: Date
}

const toStage = (row: StageRow): Stage => ({ id: row.id, funnel_id: row.funnel_id, name: row.name, type: row.type, order: row.order })
const toLostReason = (row: LostReasonRow): LostReason => ({
  ...row,
  created_at: iso(row.created_at)!,
  updated_at: iso(row.updated_at)!
})

export interface StageWithFunnel extends Stage {
  readonly company_id: number
}

/** Funnels, stages, deal types and lost reasons: the configuration deals are filed under. */
export class FunnelsRepo extends Context.Service<FunnelsRepo, {
  list(companyId: CompanyId): Effect.Effect<ReadonlyArray<Funnel>>
  find(companyId: CompanyId, id: number, options?: { readonly forUpdate?: boolean }): Effect.Effect<Option.Option<Funnel>>
  count(companyId: CompanyId): Effect.Effect<number>
  /** The default funnel, else the first by order. */
  fallback(companyId: CompanyId): Effect.Effect<Option.Option<Funnel>>
  insert(companyId: CompanyId, input: { readonly name: string; readonly order: number; readonly is_default: boolean }): Effect.Effect<number>
  update(companyId: CompanyId, id: number, patch: { readonly name?: string; readonly order?: number; readonly is_default?: boolean }): Effect.Effect<void>
  clearDefault(companyId: CompanyId): Effect.Effect<void>
  /** Until the transaction ends, the company's other default changes wait (one default funnel, even when two requests race). */
  lockDefault(companyId: CompanyId): Effect.Effect<void>
  /** Deals filed in the funnel or stage, soft-deleted ones included (they keep their stage). */
  dealsIn(companyId: CompanyId, where: { readonly funnelId?: number; readonly stageId?: number }): Effect.Effect<number>
  /** false when a deal arrived meanwhile (the foreign key refuses). */
  delete(companyId: CompanyId, id: number): Effect.Effect<boolean>
  stage(companyId: CompanyId, id: number): Effect.Effect<Option.Option<Stage>>
  insertStage(companyId: CompanyId, funnelId: number, input: { readonly name: string; readonly type: StageType; readonly order?: number | undefined }): Effect.Effect<number>
  updateStage(companyId: CompanyId, id: number, patch: { readonly name?: string; readonly type?: StageType; readonly order?: number }): Effect.Effect<void>
  deleteStage(companyId: CompanyId, id: number): Effect.Effect<boolean>
  /** The funnel's first open stage by order. */
  firstOpenStage(companyId: CompanyId, funnelId: number): Effect.Effect<Option.Option<Stage>>
  listTypes(companyId: CompanyId): Effect.Effect<ReadonlyArray<DealType>>
  findType(companyId: CompanyId, id: number): Effect.Effect<Option.Option<DealType>>
  insertType(companyId: CompanyId, input: { readonly name: string; readonly order?: number | undefined }): Effect.Effect<number>
  updateType(companyId: CompanyId, id: number, patch: { readonly name?: string; readonly order?: number }): Effect.Effect<boolean>
  deleteType(companyId: CompanyId, id: number): Effect.Effect<boolean>
  listReasons(companyId: CompanyId): Effect.Effect<ReadonlyArray<LostReason>>
  findReason(companyId: CompanyId, id: number): Effect.Effect<Option.Option<LostReason>>
  /** None when the name is taken in the company (ignoring case). */
  insertReason(companyId: CompanyId, input: { readonly name: string; readonly is_active: boolean; readonly order?: number | undefined }): Effect.Effect<Option.Option<number>>
  /** None when the name is taken; Some(false) when the reason is not the company's. */
  updateReason(companyId: CompanyId, id: number, patch: { readonly name?: string; readonly is_active?: boolean; readonly order?: number }): Effect.Effect<Option.Option<boolean>>
  deleteReason(companyId: CompanyId, id: number): Effect.Effect<boolean>
}>()("crm/deals/FunnelsRepo") {
  static readonly layer = Layer.effect(
    FunnelsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      const withStages = Effect.fnUntraced(function*(companyId: CompanyId, funnels: ReadonlyArray<FunnelRow>) {
        if (funnels.length === 0) return []
        const stages = yield* sql<StageRow>`
          SELECT id, funnel_id, name, type, "order" FROM funnel_stages
          WHERE company_id = ${companyId} AND ${sql.in("funnel_id", funnels.map((f) => f.id))}
          ORDER BY "order", id`
        return funnels.map((f): Funnel => ({ ...f, stages: stages.filter((s) => s.funnel_id === f.id).map(toStage) }))
      })

      const columns = sql`id, company_id, name, is_default, "order"`

      const list = (companyId: CompanyId) =>
        sql<FunnelRow>`SELECT ${columns} FROM funnels WHERE company_id = ${companyId} ORDER BY "order", id`.pipe(
          Effect.flatMap((rows) => withStages(companyId, rows)),
          Effect.orDie
        )

      const one = (companyId: CompanyId, rows: ReadonlyArray<FunnelRow>) =>
        rows.length === 0 ? Effect.succeed(Option.none<Funnel>()) : Effect.map(withStages(companyId, rows), (f) => Option.some(f[0]))

      const find = (companyId: CompanyId, id: number, options?: { readonly forUpdate?: boolean }) =>
        sql<FunnelRow>`
          SELECT ${columns} FROM funnels WHERE company_id = ${companyId} AND id = ${id}
          ${options?.forUpdate === true ? sql`FOR UPDATE` : sql``}`.pipe(
          Effect.flatMap((rows) => one(companyId, rows)),
          Effect.orDie
        )

      const count = (companyId: CompanyId) =>
        sql<{ n: number }>`SELECT count(*)::int AS n FROM funnels WHERE company_id = ${companyId}`.pipe(
          Effect.map((rows) => rows[0].n),
          Effect.orDie
        )

      const fallback = (companyId: CompanyId) =>
        sql<FunnelRow>`
          SELECT ${columns} FROM funnels WHERE company_id = ${companyId}
          ORDER BY is_default DESC, "order", id LIMIT 1`.pipe(Effect.flatMap((rows) => one(companyId, rows)), Effect.orDie)

      const insert = (companyId: CompanyId, input: { readonly name: string; readonly order: number; readonly is_default: boolean }) =>
        sql<{ id: number }>`
          INSERT INTO funnels (company_id, name, "order", is_default)
          VALUES (${companyId}, ${input.name}, ${input.order}, ${input.is_default}) RETURNING id`.pipe(
          Effect.map((rows) => rows[0].id),
          Effect.orDie
        )

      const update = (companyId: CompanyId, id: number, patch: { readonly name?: string; readonly order?: number; readonly is_default?: boolean }) =>
        sql`UPDATE funnels SET ${sql.update({ ...patch, updated_at: new Date() })} WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const clearDefault = (companyId: CompanyId) =>
        sql`UPDATE funnels SET is_default = false WHERE company_id = ${companyId} AND is_default`.pipe(Effect.asVoid, Effect.orDie)

      const lockDefault = (companyId: CompanyId) =>
        sql`SELECT pg_advisory_xact_lock(hashtext('funnels_default'), ${companyId}::int)`.pipe(Effect.asVoid, Effect.orDie)

      const dealsIn = (companyId: CompanyId, where: { readonly funnelId?: number; readonly stageId?: number }) =>
        sql<{ n: number }>`
          SELECT count(*)::int AS n FROM (
            SELECT 1 FROM deals WHERE company_id = ${companyId}
            AND ${where.funnelId !== undefined ? sql`funnel_id = ${where.funnelId}` : sql`funnel_stage_id = ${where.stageId ?? 0}`}
            LIMIT 1) x`.pipe(Effect.map((rows) => rows[0].n), Effect.orDie)

      const deleteWhere = (statement: Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>) =>
        statement.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.catchReason("SqlError", "ConstraintError", () => Effect.succeed(false)),
          Effect.orDie
        )

      const remove = (companyId: CompanyId, id: number) =>
        deleteWhere(sql`DELETE FROM funnels WHERE company_id = ${companyId} AND id = ${id} RETURNING id`)

      const stage = (companyId: CompanyId, id: number) =>
        sql<StageRow>`SELECT id, funnel_id, name, type, "order" FROM funnel_stages WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toStage)),
          Effect.orDie
        )

      const insertStage = (
        companyId: CompanyId,
        funnelId: number,
        input: { readonly name: string; readonly type: StageType; readonly order?: number | undefined }
      ) =>
        sql<{ id: number }>`
          INSERT INTO funnel_stages (company_id, funnel_id, name, type, "order")
          VALUES (${companyId}, ${funnelId}, ${input.name}, ${input.type},
            ${input.order ?? sql`(SELECT coalesce(max("order") + 1, 0) FROM funnel_stages WHERE company_id = ${companyId} AND funnel_id = ${funnelId})`})
          RETURNING id`.pipe(Effect.map((rows) => rows[0].id), Effect.orDie)

      const updateStage = (companyId: CompanyId, id: number, patch: { readonly name?: string; readonly type?: StageType; readonly order?: number }) =>
        sql`UPDATE funnel_stages SET ${sql.update({ ...patch, updated_at: new Date() })} WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const deleteStage = (companyId: CompanyId, id: number) =>
        deleteWhere(sql`DELETE FROM funnel_stages WHERE company_id = ${companyId} AND id = ${id} RETURNING id`)

      const firstOpenStage = (companyId: CompanyId, funnelId: number) =>
        sql<StageRow>`
          SELECT id, funnel_id, name, type, "order" FROM funnel_stages
          WHERE company_id = ${companyId} AND funnel_id = ${funnelId} AND type = 'open'
          ORDER BY "order", id LIMIT 1`.pipe(Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toStage)), Effect.orDie)

      const listTypes = (companyId: CompanyId) =>
        sql<DealType>`SELECT id, name, "order" FROM deal_types WHERE company_id = ${companyId} ORDER BY "order", id`.pipe(Effect.orDie)

      const findType = (companyId: CompanyId, id: number) =>
        sql<DealType>`SELECT id, name, "order" FROM deal_types WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const insertType = (companyId: CompanyId, input: { readonly name: string; readonly order?: number | undefined }) =>
        sql<{ id: number }>`
          INSERT INTO deal_types (company_id, name, "order")
          VALUES (${companyId}, ${input.name},
            ${input.order ?? sql`(SELECT coalesce(max("order") + 1, 0) FROM deal_types WHERE company_id = ${companyId})`})
          RETURNING id`.pipe(Effect.map((rows) => rows[0].id), Effect.orDie)

      const updateType = (companyId: CompanyId, id: number, patch: { readonly name?: string; readonly order?: number }) =>
        sql`
          UPDATE deal_types SET ${sql.update({ ...patch, updated_at: new Date() })}
          WHERE company_id = ${companyId} AND id = ${id} RETURNING id`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)

      const deleteType = (companyId: CompanyId, id: number) =>
        sql`DELETE FROM deal_types WHERE company_id = ${companyId} AND id = ${id} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const reasonColumns = sql`id, company_id, name, is_active, "order", created_at, updated_at`

      const listReasons = (companyId: CompanyId) =>
        sql<LostReasonRow>`SELECT ${reasonColumns} FROM lost_reasons WHERE company_id = ${companyId} ORDER BY "order", id`.pipe(
          Effect.map((rows) => rows.map(toLostReason)),
          Effect.orDie
        )

      const findReason = (companyId: CompanyId, id: number) =>
        sql<LostReasonRow>`SELECT ${reasonColumns} FROM lost_reasons WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toLostReason)),
          Effect.orDie
        )

      const insertReason = (companyId: CompanyId, input: { readonly name: string; readonly is_active: boolean; readonly order?: number | undefined }) =>
        sql<{ id: number }>`
          INSERT INTO lost_reasons (company_id, name, is_active, "order")
          VALUES (${companyId}, ${input.name}, ${input.is_active},
            ${input.order ?? sql`(SELECT coalesce(max("order") + 1, 0) FROM lost_reasons WHERE company_id = ${companyId})`})
          ON CONFLICT (company_id, lower(name)) DO NOTHING RETURNING id`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => row.id)),
          Effect.orDie
        )

      const updateReason = (companyId: CompanyId, id: number, patch: { readonly name?: string; readonly is_active?: boolean; readonly order?: number }) =>
        sql`
          UPDATE lost_reasons SET ${sql.update({ ...patch, updated_at: new Date() })}
          WHERE company_id = ${companyId} AND id = ${id} RETURNING id`.pipe(
          Effect.map((rows) => Option.some(rows.length > 0)),
          Effect.catchReason("SqlError", "UniqueViolation", () => Effect.succeed(Option.none())),
          Effect.orDie
        )

      const deleteReason = (companyId: CompanyId, id: number) =>
        sql`DELETE FROM lost_reasons WHERE company_id = ${companyId} AND id = ${id} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      return FunnelsRepo.of({
        list,
        find,
        count,
        fallback,
        insert,
        update,
        clearDefault,
        lockDefault,
        dealsIn,
        delete: remove,
        stage,
        insertStage,
        updateStage,
        deleteStage,
        firstOpenStage,
        listTypes,
        findType,
        insertType,
        updateType,
        deleteType,
        listReasons,
        findReason,
        insertReason,
        updateReason,
        deleteReason
      })
    })
  )
}

import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { iso } from "./Access.ts"
import type { Deal, DealStatus } from "./Domain.ts"

interface DealRow {
  readonly id: number
  readonly company_id: number
  readonly contact_id: number
  readonly funnel_id: number
  readonly funnel_stage_id: number
  readonly conversation_id: number | null
  readonly title: string
  readonly amount: string
  readonly currency: string
  readonly status: DealStatus
  readonly type_id: number | null
  readonly source: string
  readonly utm_source: string | null
  readonly utm_medium: string | null
  readonly utm_campaign: string | null
  readonly probability: number | null
  readonly comments: string | null
  readonly begin_date: string | null
  readonly expected_close_date: string | null
  readonly channel: string | null
  readonly custom_fields: Record<string, unknown> | null
  readonly responsible_user_id: number | null
  readonly closed_at: Date | null
  readonly lost_reason: string | null
  readonly lost_reason_id: number | null
  readonly closed_amount: string | null
  readonly closed_currency: string | null
  readonly stage_changed_at: Date
  readonly created_at: Date
  readonly updated_at: Date
  readonly deleted_at: Date | null
}

export const toDeal = (row: DealRow): Deal => ({
  ...row,
  custom_fields: row.custom_fields ?? {},
  closed_at: iso(row.closed_at),
  stage_changed_at: iso(row.stage_changed_at)!,
  created_at: iso(row.created_at)!,
  updated_at: iso(row.updated_at)!,
  deleted_at: iso(row.deleted_at)
})

/** Columns a write may set; `custom_fields` goes as JSON text. */
export interface DealColumns {
  readonly contact_id?: number
  readonly funnel_id?: number
  readonly funnel_stage_id?: number
  readonly conversation_id?: number | null
  readonly title?: string
  readonly amount?: string
  readonly currency?: string
  readonly status?: DealStatus
  readonly type_id?: number | null
  readonly source?: string
  readonly utm_source?: string | null
  readonly utm_medium?: string | null
  readonly utm_campaign?: string | null
  readonly probability?: number | null
  readonly comments?: string | null
  readonly begin_date?: string | null
  readonly expected_close_date?: string | null
  readonly channel?: string | null
  readonly custom_fields?: string
  readonly responsible_user_id?: number | null
  readonly closed_at?: Date | null
  readonly lost_reason?: string | null
  readonly lost_reason_id?: number | null
  readonly closed_amount?: string | null
  readonly closed_currency?: string | null
  readonly stage_changed_at?: Date
}

export interface DealFilters {
  readonly funnel_id?: number | undefined
  readonly funnel_stage_id?: number | undefined
  readonly status?: DealStatus | undefined
  readonly contact_id?: number | undefined
  readonly responsible_user_id?: number | undefined
}

/** Deals of one company; every statement carries the company id. */
export class DealsRepo extends Context.Service<DealsRepo, {
  /** A deal, soft-deleted ones included (callers decide what a deleted deal means). */
  find(companyId: CompanyId, id: number, options?: { readonly forUpdate?: boolean }): Effect.Effect<Option.Option<Deal>>
  /** Live deals newest first, and how many match. */
  list(companyId: CompanyId, filters: DealFilters, limit: number, offset: number): Effect.Effect<{ readonly items: ReadonlyArray<Deal>; readonly total: number }>
  /** None when the conversation already has a deal (the unique index decides, races included). */
  insert(companyId: CompanyId, columns: DealColumns & { readonly contact_id: number; readonly funnel_id: number; readonly funnel_stage_id: number; readonly title: string; readonly currency: string }): Effect.Effect<Option.Option<number>>
  /** The deal as written; None when the conversation already has a deal. */
  update(companyId: CompanyId, id: number, columns: DealColumns, now: Date): Effect.Effect<Option.Option<Deal>>
  setDeleted(companyId: CompanyId, id: number, at: Date | null): Effect.Effect<void>
  contactExists(companyId: CompanyId, contactId: number): Effect.Effect<boolean>
  isMember(companyId: CompanyId, userId: number): Effect.Effect<boolean>
  conversationExists(companyId: CompanyId, conversationId: number): Effect.Effect<boolean>
  /** The company's default currency, `KZT` when unset. */
  currency(companyId: CompanyId): Effect.Effect<string>
}>()("crm/deals/DealsRepo") {
  static readonly layer = Layer.effect(
    DealsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`
        id, company_id, contact_id, funnel_id, funnel_stage_id, conversation_id, title, amount::text AS amount, currency,
        status, type_id, source, utm_source, utm_medium, utm_campaign, probability, comments,
        begin_date::text AS begin_date, expected_close_date::text AS expected_close_date, channel, custom_fields,
        responsible_user_id, closed_at, lost_reason, lost_reason_id, closed_amount::text AS closed_amount, closed_currency,
        stage_changed_at, created_at, updated_at, deleted_at`

      const find = (companyId: CompanyId, id: number, options?: { readonly forUpdate?: boolean }) =>
        sql<DealRow>`
          SELECT ${columns} FROM deals WHERE company_id = ${companyId} AND id = ${id}
          ${options?.forUpdate === true ? sql`FOR UPDATE` : sql``}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toDeal)),
          Effect.orDie
        )

      const list = (companyId: CompanyId, filters: DealFilters, limit: number, offset: number) =>
        Effect.gen(function*() {
          const where = [
            sql`company_id = ${companyId}`,
            sql`deleted_at IS NULL`,
            ...(filters.funnel_id !== undefined ? [sql`funnel_id = ${filters.funnel_id}`] : []),
            ...(filters.funnel_stage_id !== undefined ? [sql`funnel_stage_id = ${filters.funnel_stage_id}`] : []),
            ...(filters.status !== undefined ? [sql`status = ${filters.status}`] : []),
            ...(filters.contact_id !== undefined ? [sql`contact_id = ${filters.contact_id}`] : []),
            ...(filters.responsible_user_id !== undefined ? [sql`responsible_user_id = ${filters.responsible_user_id}`] : [])
          ]
          const [items, counted] = yield* Effect.all([
            // The page's ids first (an index-only walk of the filter's index), then only those rows:
            // a deep page does not fetch the rows it skips.
            sql<DealRow>`
              SELECT ${columns} FROM deals WHERE company_id = ${companyId} AND id IN (
                SELECT id FROM deals WHERE ${sql.and(where)} ORDER BY id DESC LIMIT ${limit} OFFSET ${offset})
              ORDER BY id DESC`,
            sql<{ n: number }>`SELECT count(*)::int AS n FROM deals WHERE ${sql.and(where)}`
          ], { concurrency: 2 })
          return { items: items.map(toDeal), total: counted[0].n }
        }).pipe(Effect.orDie)

      const insert = (companyId: CompanyId, values: DealColumns & { readonly contact_id: number }) =>
        sql<{ id: number }>`
          INSERT INTO deals ${sql.insert({ ...values, company_id: companyId })}
          ON CONFLICT (conversation_id) WHERE conversation_id IS NOT NULL DO NOTHING RETURNING id`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => row.id)),
          Effect.orDie
        )

      const update = (companyId: CompanyId, id: number, values: DealColumns, now: Date) =>
        sql<DealRow>`
          UPDATE deals SET ${sql.update({ ...values, updated_at: now })} WHERE company_id = ${companyId} AND id = ${id}
          RETURNING ${columns}`.pipe(
          Effect.map((rows) => Option.some(toDeal(rows[0]))),
          Effect.catchReason("SqlError", "UniqueViolation", () => Effect.succeed(Option.none<Deal>())),
          Effect.orDie
        )

      const setDeleted = (companyId: CompanyId, id: number, at: Date | null) =>
        sql`UPDATE deals SET deleted_at = ${at}, updated_at = now() WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const exists = (statement: Effect.Effect<ReadonlyArray<unknown>, unknown>) =>
        statement.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)

      return DealsRepo.of({
        find,
        list,
        insert,
        update,
        setDeleted,
        contactExists: (companyId, contactId) =>
          exists(sql`SELECT 1 FROM contacts WHERE company_id = ${companyId} AND id = ${contactId} AND deleted_at IS NULL`),
        isMember: (companyId, userId) =>
          exists(sql`SELECT 1 FROM memberships WHERE company_id = ${companyId} AND user_id = ${userId}`),
        conversationExists: (companyId, conversationId) =>
          exists(sql`SELECT 1 FROM conversations WHERE company_id = ${companyId} AND id = ${conversationId}`),
        currency: (companyId) =>
          sql<{ currency: string | null }>`SELECT default_currency AS currency FROM companies WHERE id = ${companyId}`.pipe(
            Effect.map((rows) => rows[0]?.currency ?? "KZT"),
            Effect.orDie
          )
      })
    })
  )
}

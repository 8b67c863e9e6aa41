import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { iso } from "./Access.ts"
import type { Task, TaskStatus } from "./Domain.ts"

interface TaskRow {
  readonly id: number
  readonly company_id: number
  readonly deal_id: number
  readonly contact_id: number
  readonly type: Task["type"]
  readonly title: string
  readonly description: string | null
  readonly due_at: Date | null
  readonly remind_at: Date | null
  readonly status: TaskStatus
  readonly assigned_user_id: number | null
  readonly completed_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

/** `overdue` is derived against the caller's clock: due before now while still open. */
export const toTask = (row: TaskRow, now: Date): Task => ({
  ...row,
  due_at: iso(row.due_at),
  remind_at: iso(row.remind_at),
  completed_at: iso(row.completed_at),
  overdue: row.status === "open" && row.due_at !== null && row.due_at.getTime() < now.getTime(),
  created_at: iso(row.created_at)!,
  updated_at: iso(row.updated_at)!
})

export interface TaskColumns {
  readonly type?: Task["type"]
  readonly title?: string
  readonly description?: string | null
  readonly due_at?: Date | null
  readonly remind_at?: Date | null
  readonly reminded_at?: Date | null
  readonly status?: TaskStatus
  readonly assigned_user_id?: number | null
  readonly completed_at?: Date | null
}

export interface TaskFilters {
  readonly status?: TaskStatus | undefined
  readonly assigned_user_id?: number | undefined
  readonly deal_id?: number | undefined
  readonly overdue?: boolean | undefined
}

const columns = `id, company_id, deal_id, contact_id, type, title, description, due_at, remind_at, status,
  assigned_user_id, completed_at, created_at, updated_at`

/** Deal tasks of one company; tasks of soft-deleted deals are left out of lists. */
export class TasksRepo extends Context.Service<TasksRepo, {
  find(companyId: CompanyId, id: number, now: Date, options?: { readonly forUpdate?: boolean }): Effect.Effect<Option.Option<Task>>
  list(companyId: CompanyId, filters: TaskFilters, now: Date, limit: number, offset: number): Effect.Effect<{ readonly items: ReadonlyArray<Task>; readonly total: number }>
  forDeal(companyId: CompanyId, dealId: number, now: Date): Effect.Effect<ReadonlyArray<Task>>
  insert(companyId: CompanyId, values: TaskColumns & { readonly deal_id: number; readonly contact_id: number; readonly title: string; readonly type: Task["type"]; readonly created_by_user_id: number }): Effect.Effect<number>
  update(companyId: CompanyId, id: number, values: TaskColumns, now: Date): Effect.Effect<void>
  delete(companyId: CompanyId, id: number): Effect.Effect<boolean>
  /**
   * Claims every due, unsent reminder (open tasks of live deals) and marks it sent, in one
   * statement; `SKIP LOCKED` lets several runners sweep at once without sending one twice.
   */
  claimDue(now: Date, limit: number): Effect.Effect<ReadonlyArray<Task>>
}>()("crm/deals/TasksRepo") {
  static readonly layer = Layer.effect(
    TasksRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const cols = sql.literal(columns)

      const find = (companyId: CompanyId, id: number, now: Date, options?: { readonly forUpdate?: boolean }) =>
        sql<TaskRow>`
          SELECT ${cols} FROM deal_tasks t
          WHERE company_id = ${companyId} AND id = ${id}
            AND EXISTS (SELECT 1 FROM deals d WHERE d.company_id = ${companyId} AND d.id = t.deal_id AND d.deleted_at IS NULL)
          ${options?.forUpdate === true ? sql`FOR UPDATE` : sql``}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => toTask(row, now))),
          Effect.orDie
        )

      const list = (companyId: CompanyId, filters: TaskFilters, now: Date, limit: number, offset: number) =>
        Effect.gen(function*() {
          const overdue = sql`(t.status = 'open' AND t.due_at IS NOT NULL AND t.due_at < ${now})`
          const where = [
            sql`t.company_id = ${companyId}`,
            sql`EXISTS (SELECT 1 FROM deals d WHERE d.company_id = ${companyId} AND d.id = t.deal_id AND d.deleted_at IS NULL)`,
            ...(filters.status !== undefined ? [sql`t.status = ${filters.status}`] : []),
            ...(filters.assigned_user_id !== undefined ? [sql`t.assigned_user_id = ${filters.assigned_user_id}`] : []),
            ...(filters.deal_id !== undefined ? [sql`t.deal_id = ${filters.deal_id}`] : []),
            ...(filters.overdue === true ? [overdue] : filters.overdue === false ? [sql`NOT ${overdue}`] : [])
          ]
          const rows = yield* sql<TaskRow>`
            SELECT ${cols} FROM deal_tasks t WHERE ${sql.and(where)}
            ORDER BY t.due_at ASC NULLS LAST, t.id ASC LIMIT ${limit} OFFSET ${offset}`
          const counted = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM deal_tasks t WHERE ${sql.and(where)}`
          return { items: rows.map((row) => toTask(row, now)), total: counted[0].n }
        }).pipe(Effect.orDie)

      const forDeal = (companyId: CompanyId, dealId: number, now: Date) =>
        sql<TaskRow>`
          SELECT ${cols} FROM deal_tasks WHERE company_id = ${companyId} AND deal_id = ${dealId}
          ORDER BY due_at ASC NULLS LAST, id ASC`.pipe(Effect.map((rows) => rows.map((row) => toTask(row, now))), Effect.orDie)

      const insert = (companyId: CompanyId, values: TaskColumns & { readonly deal_id: number }) =>
        sql<{ id: number }>`INSERT INTO deal_tasks ${sql.insert({ ...values, company_id: companyId })} RETURNING id`.pipe(
          Effect.map((rows) => rows[0].id),
          Effect.orDie
        )

      const update = (companyId: CompanyId, id: number, values: TaskColumns, now: Date) =>
        sql`UPDATE deal_tasks SET ${sql.update({ ...values, updated_at: now })} WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const remove = (companyId: CompanyId, id: number) =>
        sql`DELETE FROM deal_tasks WHERE company_id = ${companyId} AND id = ${id} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const claimDue = (now: Date, limit: number) =>
        sql<TaskRow>`
          UPDATE deal_tasks t SET reminded_at = ${now}
          WHERE t.id IN (
            SELECT t2.id FROM deal_tasks t2
            WHERE t2.remind_at <= ${now} AND t2.reminded_at IS NULL AND t2.status = 'open'
              AND EXISTS (SELECT 1 FROM deals d WHERE d.id = t2.deal_id AND d.deleted_at IS NULL)
            ORDER BY t2.remind_at
            LIMIT ${limit}
            FOR UPDATE OF t2 SKIP LOCKED)
          AND t.reminded_at IS NULL
          RETURNING ${sql.literal(columns.split(",").map((c) => `t.${c.trim()}`).join(", "))}`.pipe(
          Effect.map((rows) => rows.map((row) => toTask(row, now))),
          Effect.orDie
        )

      return TasksRepo.of({ find, list, forDeal, insert, update, delete: remove, claimDue })
    })
  )
}

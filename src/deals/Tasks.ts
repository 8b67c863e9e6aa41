import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { type CompanyId, CurrentActor } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { type FeatureNotAvailable, type Forbidden, invalidField, type NotFound, notFound, type Unprocessable, orNotFound } from "../platform/Errors.ts"
import { pageInfo } from "../platform/Pagination.ts"
import { dealsAccess } from "./Access.ts"
import { dealNotFound } from "./Deals.ts"
import type { CreateTask, Task, TaskListQuery, UpdateTask } from "./Domain.ts"
import { TaskNotifier } from "./Notifier.ts"
import { DealsRepo } from "./Repo.ts"
import { type TaskColumns, TasksRepo } from "./TasksRepo.ts"
import { TimelineRepo } from "./TimelineRepo.ts"

const taskNotFound = () => notFound("Task not found.")
const invalid = (field: string) => invalidField(field, `The selected ${field} is invalid.`)
const flag = (value: string | undefined) => value === undefined ? undefined : value === "1" || value === "true"

type Denied = Forbidden | FeatureNotAvailable
type Eff<A, E = never> = Effect.Effect<A, Denied | E, CurrentActor>

/** Deal tasks: their life cycle, timeline entries and assignment notices. */
export class Tasks extends Context.Service<Tasks, {
  list(query: TaskListQuery): Eff<{ readonly items: ReadonlyArray<Task>; readonly pagination: ReturnType<typeof pageInfo> }>
  forDeal(dealId: number): Eff<ReadonlyArray<Task>, NotFound>
  create(input: CreateTask): Eff<Task, Unprocessable>
  update(id: number, patch: UpdateTask): Eff<Task, NotFound | Unprocessable>
  delete(id: number): Eff<void, NotFound>
}>()("crm/deals/Tasks") {
  static readonly layerNoDeps = Layer.effect(
    Tasks,
    Effect.gen(function*() {
      const repo = yield* TasksRepo
      const deals = yield* DealsRepo
      const timeline = yield* TimelineRepo
      const events = yield* Events
      const notifier = yield* TaskNotifier
      const sql = yield* SqlClient.SqlClient
      const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        effect.pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      const liveDeal = Effect.fnUntraced(function*(companyId: CompanyId, dealId: number) {
        const deal = yield* deals.find(companyId, dealId)
        return Option.filter(deal, (d) => d.deleted_at === null)
      })

      const list = Effect.fn("Tasks.list")(function*(query: TaskListQuery) {
        const company = yield* dealsAccess("deal.view")
        const actor = yield* CurrentActor
        const perPage = query.perPage ?? 20
        const page = query.page ?? 1
        const mine = flag(query.mine) === true
        const { items, total } = yield* repo.list(company.id, {
          status: query.status,
          assigned_user_id: mine ? actor.userId : query.assigned_user_id,
          deal_id: query.deal_id,
          overdue: flag(query.overdue)
        }, yield* now, perPage, (page - 1) * perPage)
        return { items, pagination: pageInfo(page, perPage, total) }
      })

      const forDeal = Effect.fn("Tasks.forDeal")(function*(dealId: number) {
        const company = yield* dealsAccess("deal.view")
        if (Option.isNone(yield* liveDeal(company.id, dealId))) return yield* dealNotFound()
        return yield* repo.forDeal(company.id, dealId, yield* now)
      })

      const assigned = Effect.fnUntraced(function*(companyId: CompanyId, task: Task, actorId: number, at: Date) {
        if (task.assigned_user_id === null || task.assigned_user_id === actorId) return
        yield* notifier.notify(companyId, task.assigned_user_id, "deal_task.assigned", { task, assigned_by_user_id: actorId }, at)
      })

      const create = Effect.fn("Tasks.create")(function*(input: CreateTask) {
        const company = yield* dealsAccess("deal.update")
        const actor = yield* CurrentActor
        const deal = yield* liveDeal(company.id, input.deal_id)
        if (Option.isNone(deal)) return yield* invalid("deal_id")
        if (input.assigned_user_id !== undefined && !(yield* deals.isMember(company.id, input.assigned_user_id))) {
          return yield* invalid("assigned_user_id")
        }
        const at = yield* now
        const id = yield* repo.insert(company.id, {
          deal_id: deal.value.id,
          contact_id: deal.value.contact_id,
          type: input.type ?? "call",
          title: input.title.trim(),
          description: input.description ?? null,
          due_at: input.due_at == null ? null : new Date(input.due_at),
          remind_at: input.remind_at == null ? null : new Date(input.remind_at),
          assigned_user_id: input.assigned_user_id ?? actor.userId,
          created_by_user_id: actor.userId
        })
        const task = yield* orNotFound(yield* repo.find(company.id, id, at))
        yield* timeline.add(company.id, deal.value.id, {
          type: "task_created",
          actorUserId: actor.userId,
          body: task.title,
          metadata: { task_id: task.id, type: task.type, due_at: task.due_at, assigned_user_id: task.assigned_user_id }
        })
        yield* events.emit(company.id, "deal_task.created", { task })
        yield* assigned(company.id, task, actor.userId, at)
        return task
      }, transaction)

      const update = Effect.fn("Tasks.update")(function*(id: number, patch: UpdateTask) {
        const company = yield* dealsAccess("deal.update")
        const actor = yield* CurrentActor
        const at = yield* now
        const found = yield* repo.find(company.id, id, at, { forUpdate: true })
        if (Option.isNone(found)) return yield* taskNotFound()
        const before = found.value
        if (patch.assigned_user_id !== undefined && !(yield* deals.isMember(company.id, patch.assigned_user_id))) {
          return yield* invalid("assigned_user_id")
        }
        const columns: Record<string, unknown> = {}
        if (patch.type !== undefined && patch.type !== before.type) columns.type = patch.type
        if (patch.title !== undefined && patch.title.trim() !== before.title) columns.title = patch.title.trim()
        if (patch.description !== undefined && patch.description !== before.description) columns.description = patch.description
        if (patch.assigned_user_id !== undefined && patch.assigned_user_id !== before.assigned_user_id) {
          columns.assigned_user_id = patch.assigned_user_id
        }
        const instant = (value: string | null) => value === null ? null : new Date(value)
        if (patch.due_at !== undefined && (instant(patch.due_at)?.toISOString() ?? null) !== before.due_at) {
          columns.due_at = instant(patch.due_at)
        }
        if (patch.remind_at !== undefined && (instant(patch.remind_at)?.toISOString() ?? null) !== before.remind_at) {
          columns.remind_at = instant(patch.remind_at)
          // A new reminder time is a new timer.
          columns.reminded_at = null
        }
        if (patch.status !== undefined && patch.status !== before.status) {
          columns.status = patch.status
          columns.completed_at = patch.status === "open" ? null : at
        }
        if (Object.keys(columns).length === 0) return before
        yield* repo.update(company.id, id, columns as TaskColumns, at)
        const task = yield* orNotFound(yield* repo.find(company.id, id, at))
        const changes = Object.keys(columns).filter((key) => key !== "reminded_at")
        yield* events.emit(company.id, "deal_task.updated", { task, changes })
        if (before.status === "open" && task.status !== "open") {
          yield* timeline.add(company.id, task.deal_id, {
            type: "task_completed",
            actorUserId: actor.userId,
            body: task.title,
            metadata: { task_id: task.id, status: task.status }
          })
        }
        if (before.assigned_user_id !== task.assigned_user_id) yield* assigned(company.id, task, actor.userId, at)
        return task
      }, transaction)

      const remove = Effect.fn("Tasks.delete")(function*(id: number) {
        const company = yield* dealsAccess("deal.update")
        const found = yield* repo.find(company.id, id, yield* now)
        if (Option.isNone(found)) return yield* taskNotFound()
        yield* repo.delete(company.id, id)
      })

      return Tasks.of({ list, forDeal, create, update, delete: remove })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide([TasksRepo.layer, DealsRepo.layer, TimelineRepo.layer, TaskNotifier.layer])
  )
}

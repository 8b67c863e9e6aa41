import { Clock, Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId } from "../auth/Domain.ts"
import { sweepEvery } from "../platform/Sweep.ts"
import { TaskNotifier } from "./Notifier.ts"
import { TasksRepo } from "./TasksRepo.ts"

const batch = 100

/**
 * One sweep of the reminder timer table: claims due reminders and emits `deal_task.reminder` to
 * each assignee in the same transaction, so a reminder is marked sent exactly when its event
 * commits (never twice, never lost). Returns how many were claimed.
 */
export const sweepReminders = Effect.gen(function*() {
  const repo = yield* TasksRepo
  const notifier = yield* TaskNotifier
  const sql = yield* SqlClient.SqlClient
  let total = 0
  while (true) {
    const claimed = yield* Effect.gen(function*() {
      const now = new Date(yield* Clock.currentTimeMillis)
      const tasks = yield* repo.claimDue(now, batch)
      for (const task of tasks) {
        if (task.assigned_user_id === null) continue
        yield* notifier.notify(CompanyId.make(task.company_id), task.assigned_user_id, "deal_task.reminder", { task }, now)
      }
      return tasks.length
    }).pipe(sql.withTransaction, Effect.orDie)
    total += claimed
    if (claimed < batch) return total
  }
}).pipe(Effect.withSpan("Reminders.sweep"))

/**
 * The durable reminder timer: the table is the timer, so reminders survive restarts, and one
 * due while no runner was up fires at the first sweep, which runs as soon as the layer starts.
 * Register in `src/Background.ts`.
 */
export const remindersLayer = (options: { readonly interval?: Duration.Input } = {}) =>
  sweepEvery("deal task reminder", sweepReminders, options.interval ?? "5 seconds").pipe(Layer.provide([TasksRepo.layer, TaskNotifier.layer]))

export const RemindersLayer = remindersLayer()

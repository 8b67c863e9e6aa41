import { Clock, Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { inBatches, sweepEvery } from "../platform/Sweep.ts"
import { ConversationsRepo } from "./Repo.ts"

const batch = 100

/**
 * One sweep of the snooze timer: reopens the snoozed conversations whose `snoozed_until` has come
 * and announces each in the same transaction, so a reopening is never lost nor announced twice.
 * Runners sweep concurrently without waiting on each other (SKIP LOCKED). Answers how many reopened.
 */
export const sweepSnoozed = Effect.gen(function*() {
  const repo = yield* ConversationsRepo
  const events = yield* Events
  const sql = yield* SqlClient.SqlClient
  return yield* inBatches(batch, Effect.gen(function*() {
    const due = yield* repo.reopenDue(new Date(yield* Clock.currentTimeMillis), batch)
    for (const row of due) {
      yield* events.emit(row.company_id, "conversation.status_changed", {
        conversation_id: row.id,
        contact_id: row.contact_id,
        from: "snoozed",
        to: "open",
        reason: "snooze_expired",
        snoozed_until: row.snoozed_until.toISOString(),
        by_user_id: null
      })
    }
    return due.length
  }).pipe(sql.withTransaction, Effect.orDie))
}).pipe(Effect.withSpan("Snooze.sweep"))

/**
 * The durable snooze timer: the conversation row is the timer, so a snooze survives restarts, and
 * one that came due while no runner was up reopens at the first sweep, as the layer starts.
 */
export const snoozeLayer = (options: { readonly interval?: Duration.Input } = {}) =>
  sweepEvery("conversation snooze", sweepSnoozed, options.interval ?? "5 seconds").pipe(Layer.provide(ConversationsRepo.layer))

export const SnoozeLayer = snoozeLayer()

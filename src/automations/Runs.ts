import { Clock, Context, Effect, Layer, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { CompanyId } from "../auth/Domain.ts"
import { Jobs, jobKind } from "../platform/Jobs.ts"
import { redact } from "./Pii.ts"
import { AutomationsRepo } from "./Repo.ts"
import type { StartRequest } from "./Starter.ts"

/** Runs one contact may start of one automation per hour; later triggers are skipped and logged as cancelled runs. */
export const runsPerContactPerHour = 10

/**
 * One job runs one segment of a run (from its start or a wake-up) until it ends or waits; a wait ends
 * the segment and enqueues the next at its wake time. A job whose segment has passed (a retry of a job
 * that had already recorded its wait) does nothing. Steps retry inside the job, so the job's own
 * attempts only cover a runner that died.
 */
export const RunJob = jobKind("automation.run", {
  payload: Schema.Struct({ runId: Schema.String, segment: Schema.Int }),
  // Bounded so that a burst of runs queues in the table instead of taking every pooled connection
  // from the requests that feed it.
  concurrency: 16,
  lease: "60 seconds",
  maxAttempts: 5,
  retryDelay: () => "2 seconds"
})

/** Starting runs: the loop guard, the run row and its first job, in one transaction. */
export class Runs extends Context.Service<Runs, {
  start(request: StartRequest): Effect.Effect<void>
}>()("crm/automations/Runs") {
  static readonly layer = Layer.effect(
    Runs,
    Effect.gen(function*() {
      const repo = yield* AutomationsRepo
      const jobs = yield* Jobs
      const sql = yield* SqlClient.SqlClient

      const start = Effect.fn("Runs.start")(function*(request: StartRequest) {
        const companyId = CompanyId.make(request.companyId)
        const at = new Date(yield* Clock.currentTimeMillis)
        const guarded = request.contactId !== null &&
          (yield* repo.recentRuns(companyId, request.automationId, request.contactId, new Date(at.getTime() - 3600_000))) >= runsPerContactPerHour
        const id = randomUUID()
        yield* Effect.gen(function*() {
          const inserted = yield* repo.insertRun(companyId, {
            id,
            automationId: request.automationId,
            versionId: request.versionId,
            contactId: request.contactId,
            event: request.event,
            eventId: request.eventId,
            status: guarded ? "cancelled" : "running",
            triggerPayload: redact(request.context.payload ?? {}),
            context: request.context,
            state: { pending: [], visits: {}, outputs: {}, started: false, segment: 0 },
            error: guarded ? `Skipped: the contact already started ${runsPerContactPerHour} runs of this automation in the last hour.` : null,
            at
          })
          if (inserted && !guarded) yield* jobs.enqueue(RunJob, companyId, { runId: id, segment: 0 })
        }).pipe(sql.withTransaction, Effect.orDie)
        if (guarded) {
          yield* Effect.logWarning("automation run skipped by the loop guard", {
            automation_id: request.automationId,
            contact_id: request.contactId,
            company_id: request.companyId
          })
        }
      })

      return Runs.of({ start })
    })
  )
}

import { Clock, Context, DateTime, Effect, Layer, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { CompanyId } from "../auth/Domain.ts"
import { makeBatcher } from "../platform/Batcher.ts"
import { Jobs, jobKind } from "../platform/Jobs.ts"
import { redact } from "./Pii.ts"
import { AutomationsRepo, type NewRun } from "./Repo.ts"
import type { Started, StartRequest } from "./Starter.ts"

/** Runs one contact may start of one automation per hour; later triggers are skipped and logged as cancelled runs. */
export const runsPerContactPerHour = 10

/**
 * One job runs one segment of a run (from its start or a wake-up) until it ends or waits; a wait ends
 * the segment and enqueues the next at its wake time. A run's first segment runs at once in the process
 * that admitted it (`RunExecutor.direct`); its job is only the fallback, due `directHold` later, held off
 * while that runs and dismissed when it is done, so a runner adopts it only if that process died. A job
 * whose segment has passed (a retry of a job that had already recorded its wait) does nothing. Steps
 * retry inside the job, so the job's own attempts only cover a runner that died.
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

/** A run's state when it is admitted: nothing done, its first segment next. */
export const firstState = { pending: [], visits: {}, outputs: {}, started: false, segment: 0 }

/** How long the fallback job of a first segment run in process is held off, renewed while it runs. */
export const directHoldMs = 30_000

/**
 * Starting runs: the loop guard, the run row and its fallback job, in one statement. The runs that a
 * company's automations start while an earlier admission of the company is being written are admitted
 * together, in one statement; each automation still admits its own runs one at a time (its entity), so
 * the loop guard's count cannot race.
 */
export class Runs extends Context.Service<Runs, {
  /** The run admitted (null: the event already started one, or the loop guard skipped it). */
  start(request: StartRequest): Effect.Effect<Started | null>
}>()("crm/automations/Runs") {
  static readonly layer = Layer.effect(
    Runs,
    Effect.gen(function*() {
      const repo = yield* AutomationsRepo
      const jobs = yield* Jobs

      const admit = Effect.fnUntraced(function*(requests: ReadonlyArray<StartRequest>) {
        const companyId = CompanyId.make(requests[0].companyId)
        const at = new Date(yield* Clock.currentTimeMillis)
        const runs = requests.map((request): NewRun => ({
          id: randomUUID(),
          automationId: request.automationId,
          versionId: request.versionId,
          contactId: request.contactId,
          event: request.event,
          eventId: request.eventId,
          triggerPayload: redact(request.context.payload ?? {}),
          context: request.context,
          state: firstState,
          at
        }))
        // The runs and their fallback jobs in one statement: a run row never lacks its job.
        const fallback = yield* jobs.enqueueing(
          RunJob,
          companyId,
          runs.map((run) => ({ key: run.id, payload: { runId: run.id, segment: 0 } })),
          DateTime.fromDateUnsafe(new Date(at.getTime() + directHoldMs)),
          repo.admitted
        )
        const admitted = yield* repo.admitRuns(companyId, runs, {
          since: new Date(at.getTime() - 3600_000),
          limit: runsPerContactPerHour,
          skipped: `Skipped: the contact already started ${runsPerContactPerHour} runs of this automation in the last hour.`
        }, fallback)
        return yield* Effect.forEach(runs, (run, i) => {
          const row = admitted.get(run.id)
          if (row !== undefined && row.status === "running" && row.jobId !== null) {
            return Effect.succeed<Started | null>({ runId: run.id, jobId: row.jobId, enqueuedAt: at.getTime(), actor: row.actor, timezone: row.timezone })
          }
          const skipped = row?.status === "cancelled"
            ? Effect.logWarning("automation run skipped by the loop guard", {
              automation_id: run.automationId,
              contact_id: run.contactId,
              company_id: requests[i].companyId
            })
            : Effect.void
          return Effect.as(skipped, null)
        })
      })

      const admissions = yield* makeBatcher<StartRequest, Started | null>({
        key: (request) => String(request.companyId),
        max: 256,
        run: (_, requests) => admit(requests)
      })

      return Runs.of({ start: admissions.submit })
    })
  )
}

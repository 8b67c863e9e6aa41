import { Duration, Effect, Schedule } from "effect"
import { CompanyId } from "../auth/Domain.ts"
import { jobHandler } from "../platform/Jobs.ts"
import { Broadcasts } from "./Broadcasts.ts"
import { RunJob, StartJob } from "./Kinds.ts"
import { RunDriver } from "./RunDriver.ts"

/** Drives the run through its entity and keeps the job's lease while it does. */
export const RunJobHandler = jobHandler(
  RunJob,
  Effect.gen(function*() {
    const driver = yield* RunDriver
    return (job) => {
      const keepLease = job.renew.pipe(Effect.repeat(Schedule.spaced(Duration.millis(Duration.toMillis(RunJob.lease) / 4))), Effect.andThen(Effect.never))
      return Effect.raceFirst(driver.drive(CompanyId.make(job.companyId), job.payload.run_id), keepLease)
    }
  })
)

/** The durable timer of scheduled and recurring broadcasts. */
export const StartJobHandler = jobHandler(
  StartJob,
  Effect.gen(function*() {
    const broadcasts = yield* Broadcasts
    return (job) => broadcasts.fire(CompanyId.make(job.companyId), job.payload.broadcast_id, job.payload.at)
  })
)

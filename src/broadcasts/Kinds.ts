import { Schema } from "effect"
import { jobKind } from "../platform/Jobs.ts"

/**
 * Driving one run to its end. The lease is renewed while the run's entity drives it; when the
 * process dies, another runner adopts the job after the lease and the run resumes there.
 */
export const RunJob = jobKind("broadcast.run", {
  payload: Schema.Struct({ run_id: Schema.Int }),
  // Renewed every quarter of it through the shared pool, which a large run keeps busy.
  lease: "15 seconds",
  maxAttempts: 1000,
  retryDelay: () => "5 seconds"
})

/** A durable timer: the scheduled start of a broadcast, or the next occurrence of a recurring one. */
export const StartJob = jobKind("broadcast.start", {
  payload: Schema.Struct({ broadcast_id: Schema.Int, at: Schema.String }),
  lease: "60 seconds",
  maxAttempts: 20,
  retryDelay: () => "10 seconds"
})

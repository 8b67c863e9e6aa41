import { Schema } from "effect"
import { jobKind } from "../platform/Jobs.ts"

/** What a sync has done so far: the channels it finished, so a retry reads only the others. */
export const SyncProgress = Schema.Struct({
  done: Schema.Array(Schema.Int),
  checked: Schema.Int,
  changed: Schema.Int
})
export type SyncProgress = typeof SyncProgress.Type

/**
 * A company's moderation sync: every channel's template list, read from its provider a page at a
 * time. A channel whose provider fails is read again on the next attempt, after the runner's back-off.
 */
export const TemplateSyncJob = jobKind("template.sync", {
  payload: Schema.Struct({}),
  progress: SyncProgress,
  lease: "5 minutes",
  maxAttempts: 5
})

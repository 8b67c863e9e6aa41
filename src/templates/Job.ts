import { Data, Effect, Option } from "effect"
import { CompanyId } from "../auth/Domain.ts"
import { jobHandler, type JobRun } from "../platform/Jobs.ts"
import { type SyncProgress, TemplateSyncJob } from "./Kinds.ts"
import { Moderation } from "./Moderation.ts"

/** Some channels' providers failed; the channels already read keep their verdicts and are not read again. */
export class TemplateSyncFailed extends Data.TaggedError("TemplateSyncFailed")<{ readonly channels: ReadonlyArray<string> }> {
  override get message() {
    return `The template list of ${this.channels.length} channel(s) could not be read: ${this.channels.join("; ")}`
  }
}

const started: SyncProgress = { done: [], checked: 0, changed: 0 }

/** Reads every channel's template list in turn; each channel read is a checkpoint of the job. */
export const TemplateSyncHandler = jobHandler(TemplateSyncJob, Effect.gen(function*() {
  const moderation = yield* Moderation
  return Effect.fnUntraced(function*(job: JobRun<{}, SyncProgress>) {
    const companyId = CompanyId.make(job.companyId)
    let progress = Option.getOrElse(job.progress, () => started)
    const failed: Array<string> = []
    for (const channelId of yield* moderation.syncChannels(companyId)) {
      if (progress.done.includes(channelId)) continue
      const outcome = yield* Effect.result(moderation.syncChannel(companyId, channelId))
      if (outcome._tag === "Failure") {
        yield* Effect.logWarning("template sync: the channel's provider failed").pipe(
          Effect.annotateLogs({ channel_id: channelId, error: outcome.failure.message })
        )
        failed.push(`channel ${channelId}: ${outcome.failure.message}`)
        continue
      }
      progress = {
        done: [...progress.done, channelId],
        checked: progress.checked + outcome.success.checked,
        changed: progress.changed + outcome.success.changed
      }
      yield* job.advance(progress)
    }
    if (failed.length > 0) return yield* new TemplateSyncFailed({ channels: failed })
    yield* job.complete({ checked: progress.checked, changed: progress.changed, channels: progress.done.length })
  })
}))

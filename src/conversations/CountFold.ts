import { type Duration, Effect, Layer } from "effect"
import { inBatches, sweepEvery } from "../platform/Sweep.ts"
import { ConversationsRepo } from "./Repo.ts"

const batch = 5000

/** Folds every pending count delta into the inbox's count groups; answers how many it folded. */
export const foldCounts = Effect.gen(function*() {
  const repo = yield* ConversationsRepo
  return yield* inBatches(batch, repo.foldCounts(batch))
}).pipe(Effect.withSpan("CountFold.sweep"))

/**
 * Keeps the deltas that list counts sum few: every runner folds them every `interval` (2 seconds by
 * default), so a count reads the groups plus at most a few seconds of changes.
 */
export const countFoldLayer = (options: { readonly interval?: Duration.Input } = {}) =>
  sweepEvery("conversation count fold", foldCounts, options.interval ?? "2 seconds").pipe(Layer.provide(ConversationsRepo.layer))

export const CountFoldLayer = countFoldLayer()

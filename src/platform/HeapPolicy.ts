import { Effect, Layer } from "effect"
import { setFlagsFromString } from "node:v8"
import { AppConfig } from "./Config.ts"

/**
 * How far V8 lets the old generation grow past what survived its last full collection
 * (`HEAP_GROWING_PERCENT`). V8's own policy lets it reach about four times the live heap, and a
 * broadcast run promotes each batch's rows, messages and events (they live for the batch's statements,
 * longer than two young collections): 320–370 MB of growth over a 100k run, against 82–90 MB at 50
 * (bench/README.md, Broadcasts, session 8). Set here rather than on the command line so that every way of
 * starting the app (npm start, the image, the benches and tests that build it in process) runs with it;
 * 0 leaves V8's policy.
 */
export const HeapPolicyLayer = Layer.effectDiscard(Effect.gen(function*() {
  const { heapGrowingPercent } = yield* AppConfig
  if (heapGrowingPercent <= 0) return
  try {
    setFlagsFromString(`--heap-growing-percent=${heapGrowingPercent}`)
  } catch (error) {
    yield* Effect.logWarning("the heap growing limit could not be set; V8's own policy applies", { error: String(error) })
  }
}))

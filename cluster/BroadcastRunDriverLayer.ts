import { Effect, Layer } from "effect"
import { RunDriver } from "../src/broadcasts/RunDriver.ts"
import { BroadcastRun } from "./BroadcastRun.ts"

/** Runs are driven by their entity, wherever in the cluster it lives. */
export const BroadcastRunDriverLayer = Layer.effect(
  RunDriver,
  Effect.gen(function*() {
    const runs = yield* BroadcastRun.client
    return RunDriver.of({
      drive: (companyId, runId) => runs(String(runId)).Drive({ companyId, runId }).pipe(Effect.orDie)
    })
  })
)

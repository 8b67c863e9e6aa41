import { Layer } from "effect"
import { Effect } from "effect"
import { CompanyId } from "../src/auth/Domain.ts"
import { RunEngine } from "../src/broadcasts/Engine.ts"
import { BroadcastRun } from "./BroadcastRun.ts"

export const BroadcastRunLayer = BroadcastRun.toLayer(
  Effect.gen(function*() {
    const engine = yield* RunEngine
    return BroadcastRun.of({
      Drive: ({ payload }) => engine.drive(CompanyId.make(payload.companyId), payload.runId)
    })
  }),
  { maxIdleTime: "1 minute", concurrency: 1, mailboxCapacity: "unbounded" }
)

export const BroadcastRunEntities = BroadcastRunLayer.pipe(Layer.provide(RunEngine.layer))

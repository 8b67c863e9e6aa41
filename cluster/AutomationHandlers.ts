import { Effect, Layer } from "effect"
import { Runs } from "../src/automations/Runs.ts"
import { Automation } from "./Automation.ts"

export const AutomationLayer = Automation.toLayer(
  Effect.gen(function*() {
    const runs = yield* Runs
    return Automation.of({ Start: ({ payload }) => runs.start(payload) })
  }),
  { maxIdleTime: "5 minutes", mailboxCapacity: "unbounded" }
)

export const AutomationEntities = Layer.mergeAll(AutomationLayer)

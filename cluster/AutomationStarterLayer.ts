import { Effect, Layer } from "effect"
import { AutomationStarter } from "../src/automations/Starter.ts"
import { Automation } from "./Automation.ts"

/** Runs start in the entity of their automation, wherever in the cluster it lives. */
export const AutomationStarterLayer = Layer.effect(
  AutomationStarter,
  Effect.gen(function*() {
    const automations = yield* Automation.client
    return AutomationStarter.of({
      start: (request) => automations(request.automationId).Start(request).pipe(Effect.orDie)
    })
  })
)

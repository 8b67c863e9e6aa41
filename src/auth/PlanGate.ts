import { Context, Effect, Layer, Option } from "effect"
import { requireFeature } from "./Domain.ts"
import { PlanGate, RequiredFeature } from "./Middleware.ts"

export const PlanGateLayer = Layer.succeed(PlanGate, (httpEffect, { endpoint, group }) =>
  Effect.gen(function*() {
    const feature = Context.getOption(endpoint.annotations, RequiredFeature)
    // A gate without a feature is a wiring mistake, not a request's fault.
    if (Option.isNone(feature)) return yield* Effect.die(new Error(`PlanGate on ${group.identifier}.${endpoint.name} without requiresFeature`))
    yield* requireFeature(feature.value)
    return yield* httpEffect
  }))

import { Effect, Predicate } from "effect"
import { ConditionData } from "../Actions.ts"
import { evaluate } from "../Conditions.ts"
import { factsFrom } from "../Triggers.ts"
import { defineAction } from "./Action.ts"

/** Fields of conditions are read from the trigger (`trigger.…`) and earlier steps' outputs (`steps.<node>.…`). */
export const condition = defineAction({
  ids: ["condition"],
  data: ConditionData,
  run: Effect.fnUntraced(function*(data, input, services) {
    const { run } = input
    const scope = { trigger: run.context, steps: input.outputs }
    const path = (field: string) =>
      field.split(".").reduce<unknown>((v, k) => (Predicate.hasProperty(v, k) ? v[k] : undefined), scope)
    const contactId = Effect.succeed(typeof run.context.contact_id === "number" ? run.context.contact_id : null)
    const result = yield* evaluate(data.conditions, data.conditionsJoiner, factsFrom(services.ctx, input.companyId, run.context, contactId, path), true)
    return { output: { result }, commit: Effect.void, replayable: true }
  })
})

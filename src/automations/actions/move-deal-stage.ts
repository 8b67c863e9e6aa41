import { Effect, Predicate } from "effect"
import { MoveStageData } from "../Actions.ts"
import { asActor, defineAction, doneWith, permanent, type StepInput } from "./Action.ts"
import type { ActionServices } from "./ActionServices.ts"

/** The trigger's deal, else the run's last created deal, else the contact's deal. */
const dealOf = Effect.fnUntraced(function*(input: StepInput, services: ActionServices["Service"]) {
  const { run } = input
  if (typeof run.context.deal_id === "number") return run.context.deal_id
  const created = Object.values(input.outputs).flatMap((o) => (Predicate.hasProperty(o, "deal_id") && typeof o.deal_id === "number" ? [o.deal_id] : []))
  const last = created.at(-1)
  if (last !== undefined) return last
  if (typeof run.context.contact_id === "number") {
    const found = yield* services.ctx.dealStage(input.companyId, null, run.context.contact_id)
    if (found !== null) return found.dealId
  }
  return yield* permanent("The run has no deal to move.")
})

export const moveDealStage = defineAction({
  ids: ["move-deal-stage"],
  data: MoveStageData,
  run: Effect.fnUntraced(function*(data, input, services) {
    const dealId = yield* dealOf(input, services)
    yield* asActor(input.actor, services.deals.update(dealId, { funnel_stage_id: data.funnel_stage_id }))
    return doneWith({ deal_id: dealId, funnel_stage_id: data.funnel_stage_id })
  })
})

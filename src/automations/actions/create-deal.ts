import { Effect } from "effect"
import type { CreateDeal } from "../../deals/Domain.ts"
import { CreateDealData } from "../Actions.ts"
import { asActor, contactOf, defineAction, doneWith, transient } from "./Action.ts"

export const createDeal = defineAction({
  ids: ["create-deal"],
  data: CreateDealData,
  run: Effect.fnUntraced(function*(data, input, services) {
    const contactId = yield* contactOf(input)
    const deal: CreateDeal = {
      title: data.title,
      contact_id: contactId,
      ...(data.funnel_id !== undefined ? { funnel_id: data.funnel_id } : {}),
      ...(data.funnel_stage_id !== undefined ? { funnel_stage_id: data.funnel_stage_id } : {}),
      ...(data.amount !== undefined ? { amount: String(data.amount) } : {}),
      source: "automation"
    }
    // Created with its step row in one transaction: a retried step never makes a second deal.
    const created = yield* asActor(input.actor, services.deals.create(deal)).pipe(
      services.sql.withTransaction,
      Effect.catchTag("SqlError", (e) => Effect.fail(transient(e.message)))
    )
    return doneWith({ deal_id: created.id, funnel_stage_id: created.funnel_stage_id })
  })
})

import { Effect } from "effect"
import { Empty } from "../Actions.ts"
import { asActor, contactOf, defineAction, doneWith } from "./Action.ts"

export const optOutContact = defineAction({
  ids: ["opt-out-contact"],
  data: Empty,
  run: Effect.fnUntraced(function*(_, input, services) {
    const contactId = yield* contactOf(input)
    const result = yield* asActor(input.actor, services.contacts.setOptOut(contactId, true))
    return doneWith({ contact_id: contactId, opted_out_at: result.opted_out_at })
  })
})

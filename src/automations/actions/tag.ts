import { Effect } from "effect"
import { TagData } from "../Actions.ts"
import { contactOf, defineAction, permanent } from "./Action.ts"

export const tag = defineAction({
  ids: ["add-tag", "remove-tag"],
  data: TagData,
  run: Effect.fnUntraced(function*({ tag_id }, input, services) {
    const contactId = yield* contactOf(input)
    const { companyId, actor } = input
    const changed = yield* services.tagChanges.submit({ companyId, actor, contactId, tagId: tag_id, adding: input.action.id === "add-tag" })
    if (typeof changed !== "boolean") return yield* permanent(changed.message)
    return { output: { contact_id: contactId, tag_id }, commit: Effect.void, replayable: true }
  })
})

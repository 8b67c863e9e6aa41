import { Effect } from "effect"
import { AssignData } from "../Actions.ts"
import { defineAction, doneWith, permanent } from "./Action.ts"

export const assignConversation = defineAction({
  ids: ["assign-conversation"],
  data: AssignData,
  run: Effect.fnUntraced(function*(data, input, services) {
    const { companyId, run } = input
    const { ctx, events, sql } = services
    const conversationId = run.context.conversation_id
    if (typeof conversationId !== "number") return yield* permanent("The trigger names no conversation.")
    const to = { userId: data.user_id, teamId: data.team_id }
    // Setting the same assignee again is harmless, so a replayed step needs no guard.
    const assigned = yield* Effect.gen(function*() {
      if (!(yield* ctx.assign(companyId, conversationId, to))) return false
      yield* events.emit(companyId, "conversation.assigned", {
        conversation_id: conversationId,
        assigned_user_id: data.user_id ?? null,
        assigned_team_id: data.team_id ?? null,
        ...(data.user_id !== undefined ? { user_id: data.user_id } : {}),
        automation_id: run.automation_id
      })
      return true
    }).pipe(sql.withTransaction, Effect.orDie)
    if (!assigned) return yield* permanent(data.user_id !== undefined ? "The user is not a member of the company." : "The team was not found.")
    return doneWith({ conversation_id: conversationId, user_id: data.user_id ?? null, team_id: data.team_id ?? null })
  })
})

import { actionById, type CatalogEntry } from "../Actions.ts"
import type { Action } from "./Action.ts"
import { assignConversation } from "./assign-conversation.ts"
import { condition } from "./condition.ts"
import { createDeal } from "./create-deal.ts"
import { httpRequest } from "./http-request.ts"
import { moveDealStage } from "./move-deal-stage.ts"
import { notifyUser } from "./notify-user.ts"
import { optOutContact } from "./opt-out-contact.ts"
import { sendMessage } from "./send-message.ts"
import { sendTemplate } from "./send-template.ts"
import { tag } from "./tag.ts"
import { updateContactField } from "./update-contact-field.ts"

/** Every action a step runs; `wait` is the executor's own (it ends the segment). */
export const actions: ReadonlyArray<Action> = [
  sendMessage,
  sendTemplate,
  tag,
  assignConversation,
  updateContactField,
  optOutContact,
  createDeal,
  moveDealStage,
  notifyUser,
  httpRequest,
  condition
]

export interface Registered {
  readonly entry: CatalogEntry
  readonly action: Action
}

/** The action and catalogue entry of each id a step may run. */
export const registry: ReadonlyMap<string, Registered> = new Map(
  actions.flatMap((action) => action.ids.flatMap((id) => {
    const entry = actionById.get(id)
    return entry === undefined ? [] : [[id, { entry, action }] as const]
  }))
)

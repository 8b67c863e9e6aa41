import { Effect } from "effect"
import { NotifyData } from "../Actions.ts"
import { defineAction } from "./Action.ts"

export const notifyUser = defineAction({
  ids: ["notify-user"],
  data: NotifyData,
  run: (data, input, services) => {
    const { run } = input
    const payload = { user_id: data.user_id, message: data.message, automation_id: run.automation_id, run_id: run.id, node_id: input.nodeId }
    return Effect.succeed({ output: { user_id: data.user_id }, commit: services.events.emit(input.companyId, "automation.notification", payload) })
  }
})

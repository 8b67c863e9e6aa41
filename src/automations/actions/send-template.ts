import { Effect } from "effect"
import { templateContent } from "../../templates/Sending.ts"
import { TemplateData } from "../Actions.ts"
import { defineAction, doneWith } from "./Action.ts"
import { keyOf, sendRefusals, threadFor } from "./Sending.ts"

export const sendTemplate = defineAction({
  ids: ["send-template"],
  data: TemplateData,
  run: Effect.fnUntraced(function*(data, input, services) {
    const { companyId, run, actor } = input
    const thread = yield* threadFor(services, input, data, undefined)
    const template = yield* sendRefusals(services.templates.approved(companyId, {
      templateId: data.template_id,
      channelId: thread.channel_id,
      language: data.language
    }))
    const key = keyOf(input)
    const content = yield* sendRefusals(Effect.fromResult(
      templateContent(template, data.variables ?? {}, { automation_id: run.automation_id, automation_run_id: run.id })
    ))
    const message = yield* sendRefusals(services.sender.one({
      ...content,
      thread,
      endpoint: "send-template",
      companyId,
      userId: actor.userId,
      messageType: "template",
      quotedMessageId: null,
      quotedExternalMessageId: null,
      idempotency: { key, hash: key }
    }))
    return doneWith({ message_id: message.id, template_id: template.instanceId })
  })
})

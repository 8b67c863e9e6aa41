import { Effect } from "effect"
import { SendData } from "../Actions.ts"
import { defineAction, doneWith, permanent } from "./Action.ts"
import { keyOf, sendRefusals, threadFor } from "./Sending.ts"

/** Text or an uploaded voice note; the messenger variants send only on their channel type. */
export const sendMessage = defineAction({
  ids: ["send-message", "msgr_a-send-message", "msgr_b-send-message"],
  data: SendData,
  run: Effect.fnUntraced(function*(data, input, services) {
    const { companyId, run, actor } = input
    const thread = yield* threadFor(services, input, data, input.action.channelType)
    const key = keyOf(input)
    const attachments = "media_id" in data
      ? yield* services.media.resolve(companyId, [{ media_id: data.media_id }]).pipe(Effect.mapError((e) => permanent(e.message)))
      : []
    const message = yield* sendRefusals(services.sender.one({
      thread,
      endpoint: "send",
      companyId,
      userId: actor.userId,
      messageType: attachments[0]?.type ?? "text",
      text: "text" in data ? data.text : null,
      attachments,
      quotedMessageId: null,
      quotedExternalMessageId: null,
      metadata: { automation_id: run.automation_id, automation_run_id: run.id },
      idempotency: { key, hash: key }
    }))
    return doneWith({ message_id: message.id, conversation_id: message.conversation_id, channel_id: message.channel_id })
  })
})

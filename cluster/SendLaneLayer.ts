import { Effect, Layer } from "effect"
import { SendLane, SendUnavailable } from "../src/messages/SendLane.ts"
import { Conversation } from "./Conversation.ts"

/** Sends run through the entity of their conversation, wherever in the cluster it lives. */
export const SendLaneLayer = Layer.effect(
  SendLane,
  Effect.gen(function*() {
    const conversations = yield* Conversation.client
    return SendLane.of({
      run: (request) =>
        conversations(String(request.conversationId)).Send(request).pipe(
          Effect.catchIf(
            (e) => e._tag !== "SendRefusal",
            (e) =>
              Effect.logWarning("conversation entity unavailable", e).pipe(
                Effect.andThen(Effect.fail(new SendUnavailable({ message: "The conversation is busy; retry shortly." })))
              )
          )
        )
    })
  })
)

import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Conversations } from "../conversations/Conversations.ts"
import { Realtime } from "./Realtime.ts"

export const RealtimeAuthHttp = HttpApiBuilder.group(Api, "realtimeAuth", Effect.fn(function*(handlers) {
  const realtime = yield* Realtime
  const conversations = yield* Conversations
  return handlers.handle("auth", ({ payload }) =>
    realtime.authorize(payload.socket_id, payload.channel_name).pipe(Effect.provideService(Conversations, conversations)))
})).pipe(Layer.provide(Conversations.layer))

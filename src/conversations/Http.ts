import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { data } from "../platform/Envelope.ts"
import { Conversations } from "./Conversations.ts"

export const ConversationsHttp = HttpApiBuilder.group(Api, "conversations", Effect.fn(function*(handlers) {
  const conversations = yield* Conversations
  return handlers
    .handle("list", ({ query }) => data(conversations.list(query)))
    .handle("get", ({ params }) => data(conversations.get(params.id)))
    .handle("assign", ({ params, payload }) => data(conversations.assign(params.id, payload)))
    .handle("status", ({ params, payload }) => data(conversations.setStatus(params.id, payload)))
    .handle("priority", ({ params, payload }) => data(conversations.setPriority(params.id, payload)))
    .handle("read", ({ params, payload }) => data(conversations.markRead(params.id, payload)))
})).pipe(Layer.provide(Conversations.layer))

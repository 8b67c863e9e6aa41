import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { data } from "../platform/Envelope.ts"
import { Conversations } from "./Conversations.ts"

export const ConversationsHttp = HttpApiBuilder.group(Api, "conversations", Effect.fn(function*(handlers) {
  const conversations = yield* Conversations
  return handlers
    .handle("list", ({ query }) => data(conversations.list(query.page ?? 1, query.perPage ?? 20)))
    .handle("get", ({ params }) => data(conversations.get(params.id)))
})).pipe(Layer.provide(Conversations.layer))

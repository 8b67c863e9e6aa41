import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Conversations } from "./Conversations.ts"

export const ConversationsHttp = HttpApiBuilder.group(Api, "conversations", Effect.fn(function*(handlers) {
  const conversations = yield* Conversations
  return handlers
    .handle("list", ({ query }) => Effect.map(conversations.list(query.page ?? 1, query.perPage ?? 20), (data) => ({ data })))
    .handle("get", ({ params }) => Effect.map(conversations.get(params.id), (data) => ({ data })))
}))

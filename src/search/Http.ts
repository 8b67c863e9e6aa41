import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { data } from "../platform/Envelope.ts"
import { Search } from "./Search.ts"

export const SearchHttp = HttpApiBuilder.group(Api, "messageSearch", Effect.fn(function*(handlers) {
  const search = yield* Search
  return handlers.handle("search", ({ query }) => data(search.messages(query)))
})).pipe(Layer.provide(Search.layer))

import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Search } from "./Search.ts"

export const SearchHttp = HttpApiBuilder.group(Api, "messageSearch", Effect.fn(function*(handlers) {
  const search = yield* Search
  return handlers.handle("search", ({ query }) => Effect.map(search.messages(query), (data) => ({ data })))
}))

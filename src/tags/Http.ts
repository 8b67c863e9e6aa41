import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Tags } from "./Tags.ts"

export const TagsHttp = HttpApiBuilder.group(Api, "tags", Effect.fn(function*(handlers) {
  const tags = yield* Tags
  return handlers
    .handle("list", () => Effect.map(tags.list, (data) => ({ data })))
    .handle("create", ({ payload }) => Effect.map(tags.create(payload), (data) => ({ data })))
    .handle("get", ({ params }) => Effect.map(tags.get(params.tag), (data) => ({ data })))
    .handle("update", ({ params, payload }) => Effect.map(tags.update(params.tag, payload), (data) => ({ data })))
    .handle("delete", ({ params }) => Effect.as(tags.delete(params.tag), { data: { message: "Tag deleted." } }))
}))

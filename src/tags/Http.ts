import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { data } from "../platform/Envelope.ts"
import { Tags } from "./Tags.ts"

export const TagsHttp = HttpApiBuilder.group(Api, "tags", Effect.fn(function*(handlers) {
  const tags = yield* Tags
  return handlers
    .handle("list", () => data(tags.list))
    .handle("create", ({ payload }) => data(tags.create(payload)))
    .handle("get", ({ params }) => data(tags.get(params.tag)))
    .handle("update", ({ params, payload }) => data(tags.update(params.tag, payload)))
    .handle("delete", ({ params }) => Effect.as(tags.delete(params.tag), { data: { message: "Tag deleted." } }))
})).pipe(Layer.provide(Tags.layer))

import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { data } from "../platform/Envelope.ts"
import { Segments } from "./Segments.ts"

export const SegmentsHttp = HttpApiBuilder.group(Api, "segments", Effect.fn(function*(handlers) {
  const segments = yield* Segments
  return handlers
    .handle("list", ({ query }) => data(segments.list(query)))
    .handle("create", ({ payload }) => data(segments.create(payload)))
    .handle("estimate", ({ payload }) => data(segments.estimate(payload)))
    .handle("update", ({ params, payload }) => data(segments.update(params.segment, payload)))
    .handle("updateByPost", ({ params, payload }) => data(segments.update(params.segment, payload)))
    .handle("delete", ({ params }) => Effect.as(segments.delete(params.segment), { data: { message: "Segment deleted." } }))
    .handle("addMembers", ({ params, payload }) => data(segments.addMembers(params.segment, payload)))
    .handle("removeMembers", ({ params, payload }) => data(segments.removeMembers(params.segment, payload)))
})).pipe(Layer.provide(Segments.layer))

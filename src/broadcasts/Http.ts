import { Effect, Layer, Option } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { data } from "../platform/Envelope.ts"
import { notFound } from "../platform/Errors.ts"
import { Broadcasts } from "./Broadcasts.ts"

const statusesOf = (query: { readonly "statuses[]"?: string | ReadonlyArray<string> | undefined; readonly statuses?: string | ReadonlyArray<string> | undefined }) =>
  [query["statuses[]"], query.statuses].flatMap((value) => value === undefined ? [] : typeof value === "string" ? value.split(",") : value)

export const BroadcastsHttp = HttpApiBuilder.group(Api, "broadcasts", Effect.fn(function*(handlers) {
  const broadcasts = yield* Broadcasts
  return handlers
    .handle("meta", () => data(broadcasts.meta()))
    .handle("list", ({ query }) => data(broadcasts.list(query.page ?? 1, query.perPage ?? 20, statusesOf(query))))
    .handle("create", ({ payload }) => data(broadcasts.create(payload)))
    .handle("estimate", ({ payload }) => data(broadcasts.estimate(payload)))
    .handle("test", ({ payload }) => data(broadcasts.test(payload)))
    .handle("assist", ({ payload }) => data(broadcasts.assist(payload)))
    .handle("get", ({ params }) => data(broadcasts.get(params.broadcast)))
    .handle("update", ({ params, payload }) => data(broadcasts.update(params.broadcast, payload)))
    .handle("updatePost", ({ params, payload }) => data(broadcasts.update(params.broadcast, payload)))
    .handle("delete", ({ params }) => Effect.as(broadcasts.delete(params.broadcast), { data: { message: "Broadcast deleted." } }))
    .handle("duplicate", ({ params }) => data(broadcasts.duplicate(params.broadcast)))
    .handle("publish", ({ params }) => data(broadcasts.publish(params.broadcast)))
    .handle("cancel", ({ params }) => data(broadcasts.cancel(params.broadcast)))
    .handle("run", ({ params }) => data(broadcasts.run(params.broadcast)))
    .handle("messages", ({ params, query }) => broadcasts.recipients(params.broadcast, query.status ?? null, query.page ?? 1, query.per_page ?? 20))
    .handle("runs", ({ params }) => data(broadcasts.runs(params.broadcast)))
    .handle("getRun", ({ params }) => data(broadcasts.getRun(params.broadcast, params.run)))
    .handle("pauseRecurring", ({ params }) => data(broadcasts.pauseRecurring(params.broadcast)))
    .handle("resumeRecurring", ({ params }) => data(broadcasts.resumeRecurring(params.broadcast)))
    .handle("pauseRun", ({ params }) => data(broadcasts.runControl(params.broadcast, params.run, "pause")))
    .handle("resumeRun", ({ params }) => data(broadcasts.runControl(params.broadcast, params.run, "resume")))
    .handle("cancelRun", ({ params }) => data(broadcasts.runControl(params.broadcast, params.run, "cancel")))
    .handle("retryFailed", ({ params }) => data(broadcasts.runControl(params.broadcast, params.run, "retry-failed")))
})).pipe(Layer.provide(Broadcasts.layer))

export const BroadcastClicksHttp = HttpApiBuilder.group(Api, "broadcastClicks", Effect.fn(function*(handlers) {
  const broadcasts = yield* Broadcasts
  return handlers.handle("click", ({ params }) =>
    Effect.flatMap(broadcasts.click(params.code), (url) =>
      Option.isNone(url)
        ? Effect.fail(notFound("Link not found."))
        : Effect.succeed(HttpServerResponse.redirect(url.value, { status: 302, headers: { "cache-control": "no-store" } }))))
})).pipe(Layer.provide(Broadcasts.layer))

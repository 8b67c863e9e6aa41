import { Effect, Layer } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { AppConfig } from "../platform/Config.ts"
import { clientIp } from "../platform/HttpKernel.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { Channels } from "./Channels.ts"
import { Hooks, MalformedBody } from "./Hooks.ts"
import { Moderation } from "../templates/Moderation.ts"
import { data } from "../platform/Envelope.ts"
import { ContactEligibility } from "../contacts/Eligibility.ts"
import { Inbound } from "../messages/Inbound.ts"

/** Hooks with what they hand inbound traffic to: message ingestion, call-permission answers and template verdicts. */
const HooksLayer = Hooks.layer.pipe(Layer.provide([Inbound.layer, ContactEligibility.layer, Moderation.layer]))

const deleted = { data: { message: "Channel deleted." } }
const statusRecorded = { data: { message: "Status recorded." } }

export const ChannelsHttp = HttpApiBuilder.group(Api, "channels", Effect.fn(function*(handlers) {
  const channels = yield* Channels
  const hooks = yield* Hooks
  return handlers
    .handle("list", () => data(channels.list))
    .handle("create", ({ payload }) => data(channels.create(payload)))
    .handle("get", ({ params }) => data(channels.get(params.id)))
    .handle("update", ({ params, payload }) => data(channels.update(params.id, payload)))
    .handle("remove", ({ params }) => Effect.as(channels.remove(params.id), deleted))
    .handle("registerWebhook", ({ params }) => data(channels.registerWebhook(params.id)))
    .handle("sandboxInbound", ({ params, payload }) => data(hooks.sandboxInbound(params.id, payload)))
    .handle("sandboxStatus", ({ params, payload }) => Effect.as(hooks.sandboxStatus(params.id, payload), statusRecorded))
    .handle("sandboxCallPermission", ({ params, payload }) =>
      data(hooks.sandboxCallPermission(params.id, payload)))
})).pipe(Layer.provide(HooksLayer))

// Webhook bodies are read raw: the WhatsApp signature covers the exact bytes sent.
const rawBody = (request: HttpServerRequest.HttpServerRequest) => Effect.map(request.arrayBuffer, (buffer) => new Uint8Array(buffer))

const accepted = <E, R>(effect: Effect.Effect<void, E | MalformedBody, R>) =>
  effect.pipe(
    Effect.as({ ok: true }),
    Effect.catchIf(
      (e): e is MalformedBody => e instanceof MalformedBody,
      (e) => Effect.succeed(HttpServerResponse.jsonUnsafe({ message: e.message }, { status: 400 }))
    )
  )

export const HooksHttp = HttpApiBuilder.group(Api, "hooks", Effect.fn(function*(handlers) {
  const hooks = yield* Hooks
  const limiter = yield* RateLimiter
  const config = yield* AppConfig
  const rule = { limit: config.hooksRateLimitPerMinute, windowSeconds: 60 }
  // Before the body is read or the channel looked up: an unauthenticated route must not let one client
  // spend the database on forged requests. Providers retry a 429, so a burst over it is delayed, not lost.
  const throttle = (channel: number, request: HttpServerRequest.HttpServerRequest) =>
    limiter.enforce("global", `hook:${channel}:${clientIp(request)}`, rule)
  return handlers
    .handleRaw("telegram", ({ params, request }) =>
      Effect.andThen(
        throttle(params.channel, request),
        accepted(Effect.flatMap(rawBody(request), (body) =>
          hooks.telegram(params.channel, request.headers["x-telegram-bot-api-secret-token"], body)))
      ))
    .handle("whatsappVerify", ({ params, query, request }) =>
      Effect.andThen(
        throttle(params.channel, request),
        hooks.whatsappVerify(params.channel, query["hub.mode"], query["hub.verify_token"], query["hub.challenge"])
      ))
    .handleRaw("whatsapp", ({ params, request }) =>
      Effect.andThen(
        throttle(params.channel, request),
        accepted(Effect.flatMap(rawBody(request), (body) =>
          hooks.whatsapp(params.channel, request.headers["x-hub-signature-256"], body)))
      ))
})).pipe(Layer.provide(HooksLayer))

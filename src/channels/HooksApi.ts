import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Forbidden, NotFound, TooManyRequests, Unauthenticated, Unprocessable } from "../platform/Errors.ts"

const HookParams = { channel: Schema.Int }
const Accepted = Schema.Struct({ ok: Schema.Boolean })
const ProviderPayload = Schema.Record(Schema.String, Schema.Unknown)

/** Public: each request proves itself with the channel's secret, not with a user credential. */
export class HooksApi extends HttpApiGroup.make("hooks")
  .add(
    HttpApiEndpoint.post("telegram", "/hooks/telegram/:channel", {
      params: HookParams,
      payload: ProviderPayload,
      success: Accepted,
      error: [Unauthenticated, NotFound, Unprocessable, TooManyRequests]
    }).annotateMerge(OpenApi.annotations({
      description: "Telegram Bot API updates. Verified by `X-Telegram-Bot-Api-Secret-Token` (set by `POST /v1/channels/{id}/webhook`); " +
        "`message` and `edited_message` are ingested, other update kinds acknowledged and ignored. 400 when the body is not JSON."
    })),
    HttpApiEndpoint.get("whatsappVerify", "/hooks/whatsapp/:channel", {
      params: HookParams,
      query: {
        "hub.mode": Schema.optional(Schema.String),
        "hub.verify_token": Schema.optional(Schema.String),
        "hub.challenge": Schema.optional(Schema.String)
      },
      success: Schema.String.pipe(HttpApiSchema.asText()),
      error: [Forbidden, NotFound, TooManyRequests]
    }).annotateMerge(OpenApi.annotations({
      description: "Meta's subscription check: echoes `hub.challenge` when `hub.mode=subscribe` and `hub.verify_token` is the channel's verify token."
    })),
    HttpApiEndpoint.post("whatsapp", "/hooks/whatsapp/:channel", {
      params: HookParams,
      payload: ProviderPayload,
      success: Accepted,
      error: [Unauthenticated, NotFound, Unprocessable, TooManyRequests]
    }).annotateMerge(OpenApi.annotations({
      description: "WhatsApp Cloud API notifications, verified by `X-Hub-Signature-256` over the raw body with the app secret. " +
        "Messages and statuses for the channel's phone number id are ingested. 400 when the body is not JSON."
    }))
  )
  .annotateMerge(OpenApi.annotations({
    title: "Provider webhooks",
    description: "Inbound traffic of the Telegram and WhatsApp Cloud channels. Nothing is stored before the request is verified. " +
      "`HOOKS_RATE_LIMIT_PER_MINUTE` (6000) requests a minute per channel and client IP, else 429."
  }))
{}

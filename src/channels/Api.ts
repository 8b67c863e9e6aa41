import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { AuthErrors, BadGateway, NotFound, Unprocessable } from "../platform/Errors.ts"
import {
  Channel,
  ChannelId,
  CreateChannel,
  SandboxCallPermission,
  SandboxCallPermissionResult,
  SandboxInbound,
  SandboxInboundResult,
  SandboxStatus,
  UpdateChannel
} from "./Domain.ts"
import { Data } from "../platform/Envelope.ts"

const ChannelParams = { id: ChannelId }
const Message = Data(Schema.Struct({ message: Schema.String }))

export class ChannelsApi extends HttpApiGroup.make("channels")
  .add(
    HttpApiEndpoint.get("list", "/v1/channels", {
      success: Data(Schema.Array(Channel)),
      error: AuthErrors
    }),
    HttpApiEndpoint.post("create", "/v1/channels", {
      payload: CreateChannel,
      success: Data(Channel).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.get("get", "/v1/channels/:id", {
      params: ChannelParams,
      success: Data(Channel),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.patch("update", "/v1/channels/:id", {
      params: ChannelParams,
      payload: UpdateChannel,
      success: Data(Channel),
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.delete("remove", "/v1/channels/:id", {
      params: ChannelParams,
      success: Message,
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.post("registerWebhook", "/v1/channels/:id/webhook", {
      params: ChannelParams,
      success: Data(Channel),
      error: [...AuthErrors, NotFound, Unprocessable, BadGateway]
    }).annotateMerge(OpenApi.annotations({
      description: "Telegram only: checks the bot token (getMe) and registers `webhook_url` with the channel's secret token " +
        "(setWebhook). WhatsApp Cloud webhooks are set in the Meta app with the channel's `verify_token`."
    })),
    HttpApiEndpoint.post("sandboxInbound", "/v1/channels/:id/sandbox/inbound", {
      params: ChannelParams,
      payload: SandboxInbound,
      success: Data(SandboxInboundResult).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.post("sandboxStatus", "/v1/channels/:id/sandbox/status", {
      params: ChannelParams,
      payload: SandboxStatus,
      success: Message,
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.post("sandboxCallPermission", "/v1/channels/:id/sandbox/call-permission", {
      params: ChannelParams,
      payload: SandboxCallPermission,
      success: Data(SandboxCallPermissionResult),
      error: [...AuthErrors, NotFound, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "The contact with the account `from.external_id` answers a call-permission request (msgr_a_business sandbox " +
        "channels), as the provider's `call_permission_reply` would; answers the contact's permission afterwards."
    }))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Channels",
    description: "Messaging channels of the company. Credentials are write-only and stored encrypted. " +
      "Sandbox channels accept simulated inbound messages, delivery statuses and call-permission answers."
  }))
{}

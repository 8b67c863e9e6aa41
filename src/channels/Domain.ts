import { Schema } from "effect"
import { ChannelTypes, ProviderKinds } from "../providers/Domain.ts"

export const ChannelId = Schema.Int
export type ChannelId = typeof ChannelId.Type

export const ChannelStatus = Schema.Literals(["connected", "disconnected"])
export type ChannelStatus = typeof ChannelStatus.Type

/** Non-secret switches; `sandbox_fail` makes every sandbox provider call fail with `channel_offline`. */
export const ChannelSettings = Schema.Struct({
  sandbox_fail: Schema.optionalKey(Schema.Boolean)
})
export type ChannelSettings = typeof ChannelSettings.Type

/** Credentials and the webhook secret never leave the server. */
export const Channel = Schema.Struct({
  id: ChannelId,
  company_id: Schema.Int,
  type: Schema.Literals(ChannelTypes),
  provider: Schema.Literals(ProviderKinds),
  name: Schema.String,
  account_name: Schema.NullOr(Schema.String),
  status: ChannelStatus,
  settings: ChannelSettings,
  /** Where the provider posts inbound traffic; null for the sandbox. */
  webhook_url: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
})
export type Channel = typeof Channel.Type

const Name = Schema.String.check(
  Schema.isPattern(/\S/, { message: "The name field is required." }),
  Schema.isMaxLength(255, { message: "The name field must not be greater than 255 characters." })
)
const AccountName = Schema.String.check(
  Schema.isMaxLength(255, { message: "The account name field must not be greater than 255 characters." })
)
const Secret = Schema.String.check(
  Schema.isPattern(/\S/, { message: "The credential must not be empty." }),
  Schema.isMaxLength(4096, { message: "The credential must not be greater than 4096 characters." })
)

/** Every provider's keys; which ones are required depends on `provider` (checked by the service). */
export const ChannelCredentials = Schema.Struct({
  bot_token: Schema.optionalKey(Secret),
  access_token: Schema.optionalKey(Secret),
  phone_number_id: Schema.optionalKey(Secret),
  app_secret: Schema.optionalKey(Secret),
  verify_token: Schema.optionalKey(Secret),
  /** WhatsApp Business Account id: needed for message templates only. */
  business_account_id: Schema.optionalKey(Secret)
})
export type ChannelCredentials = typeof ChannelCredentials.Type

export const requiredCredentials: Record<string, ReadonlyArray<keyof ChannelCredentials>> = {
  sandbox: [],
  telegram: ["bot_token"],
  whatsapp_cloud: ["access_token", "phone_number_id", "app_secret", "verify_token"]
}

/** Keys a provider uses when given: the WhatsApp Business Account id serves message templates only. */
export const optionalCredentials: Record<string, ReadonlyArray<keyof ChannelCredentials>> = {
  whatsapp_cloud: ["business_account_id"]
}

/** Real providers serve one channel type each; the sandbox simulates any. */
export const providerTypes: Record<string, ReadonlyArray<string> | null> = {
  sandbox: null,
  telegram: ["msgr_b"],
  whatsapp_cloud: ["msgr_a_business"]
}

export const CreateChannel = Schema.Struct({
  type: Schema.Literals(ChannelTypes),
  provider: Schema.Literals(ProviderKinds),
  name: Name,
  account_name: Schema.optional(Schema.NullOr(AccountName)),
  credentials: Schema.optional(ChannelCredentials),
  settings: Schema.optional(ChannelSettings)
})
export type CreateChannel = typeof CreateChannel.Type

/** `credentials` merge key by key into the stored ones (rotate one secret without resending the rest). */
export const UpdateChannel = Schema.Struct({
  name: Schema.optional(Name),
  account_name: Schema.optional(Schema.NullOr(AccountName)),
  status: Schema.optional(ChannelStatus),
  credentials: Schema.optional(ChannelCredentials),
  settings: Schema.optional(ChannelSettings)
})
export type UpdateChannel = typeof UpdateChannel.Type

const Short = (field: string, max: number) =>
  Schema.String.check(Schema.isMaxLength(max, { message: `The ${field} field must not be greater than ${max} characters.` }))

const ExternalId = (field: string) =>
  Schema.String.check(
    Schema.isPattern(/\S/, { message: `The ${field} field is required.` }),
    Schema.isMaxLength(255, { message: `The ${field} field must not be greater than 255 characters.` })
  )

/** The spec's ad attribution object; unknown keys are dropped. */
export const Referral = Schema.Struct({
  source_type: Schema.optionalKey(Schema.Literals(["ad", "post"])),
  source_id: Schema.optionalKey(Short("referral.source_id", 255)),
  headline: Schema.optionalKey(Short("referral.headline", 1024)),
  image_url: Schema.optionalKey(Short("referral.image_url", 2048)),
  video_url: Schema.optionalKey(Short("referral.video_url", 2048)),
  source_url: Schema.optionalKey(Short("referral.source_url", 2048)),
  body: Schema.optionalKey(Short("referral.body", 4096)),
  ctwa_clid: Schema.optionalKey(Short("referral.ctwa_clid", 512)),
  media_type: Schema.optionalKey(Schema.Literals(["image", "video"])),
  post_id: Schema.optionalKey(Short("referral.post_id", 255)),
  ref: Schema.optionalKey(Short("referral.ref", 255))
})
export type Referral = typeof Referral.Type

export const SandboxInbound = Schema.Struct({
  from: Schema.Struct({
    external_id: ExternalId("from.external_id"),
    username: Schema.optional(Schema.NullOr(Short("from.username", 255))),
    name: Schema.optional(Schema.NullOr(Short("from.name", 255))),
    phone: Schema.optional(Schema.NullOr(Short("from.phone", 64)))
  }),
  text: Schema.optional(Schema.NullOr(Short("text", 65535))),
  external_message_id: Schema.optional(Schema.NullOr(ExternalId("external_message_id"))),
  referral: Schema.optional(Schema.NullOr(Referral)),
  thread: Schema.optional(Schema.NullOr(Schema.Struct({
    external_id: ExternalId("thread.external_id"),
    is_group: Schema.optional(Schema.Boolean)
  })))
})
export type SandboxInbound = typeof SandboxInbound.Type

export const SandboxStatus = Schema.Struct({
  external_message_id: ExternalId("external_message_id"),
  status: Schema.Literals(["sent", "delivered", "read", "failed"]),
  error: Schema.optional(Schema.NullOr(Short("error", 1024)))
})
export type SandboxStatus = typeof SandboxStatus.Type

/** A simulated answer of the contact `from` to a call-permission request (the provider's `call_permission_reply`). */
export const SandboxCallPermission = Schema.Struct({
  from: Schema.Struct({ external_id: ExternalId("from.external_id") }),
  response: Schema.Literals(["accept", "reject"]),
  /** An acceptance without an end (otherwise it lasts 7 days). */
  permanent: Schema.optional(Schema.Boolean),
  /** The provider message id of the request being answered; default: the contact's newest open request. */
  request_message_id: Schema.optional(Schema.NullOr(ExternalId("request_message_id")))
})
export type SandboxCallPermission = typeof SandboxCallPermission.Type

export const SandboxCallPermissionResult = Schema.Struct({
  contact_id: Schema.Int,
  channel_id: Schema.Int,
  permission_status: Schema.String,
  permission_expires_at: Schema.NullOr(Schema.Int)
})

export const SandboxInboundResult = Schema.Struct({
  message_id: Schema.Int,
  conversation_id: Schema.Int,
  duplicate: Schema.Boolean
})

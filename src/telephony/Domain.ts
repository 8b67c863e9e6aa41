import { Schema } from "effect"

export const MemberId = Schema.Int
export type MemberId = typeof MemberId.Type

/** One row of the admin list: a real (non-service) member and the state of their two SIP profiles. */
export const MemberTelephony = Schema.Struct({
  user_id: Schema.Int,
  name: Schema.String,
  email: Schema.NullOr(Schema.String),
  role: Schema.String,
  enabled: Schema.Boolean,
  extension: Schema.NullOr(Schema.String),
  native_enabled: Schema.Boolean,
  registered: Schema.Boolean
}).annotate({ identifier: "MemberTelephony" })
export type MemberTelephony = typeof MemberTelephony.Type

/** The spec's "Native SIP credentials object": what a SIP client app needs, QR-importable through provisioning_uri. */
export const NativeCredentials = Schema.Struct({
  sip_username: Schema.String,
  sip_password: Schema.String,
  host: Schema.String,
  tcp_port: Schema.Int,
  tls_port: Schema.Int,
  default_transport: Schema.Literal("TCP"),
  codecs: Schema.Array(Schema.String),
  media_encryption: Schema.String,
  registered: Schema.Boolean,
  provisioning_uri: Schema.String
})
export type NativeCredentials = typeof NativeCredentials.Type

/** The built-in (WebRTC) softphone's own profile. */
export const BrowserCredentials = Schema.Struct({
  sip_username: Schema.String,
  sip_password: Schema.String,
  host: Schema.String,
  wss_url: Schema.String,
  extension: Schema.NullOr(Schema.String),
  display_name: Schema.String,
  registered: Schema.Boolean
})
export type BrowserCredentials = typeof BrowserCredentials.Type

export const SipLogin = Schema.Struct({
  sip_username: Schema.String,
  sip_password: Schema.String
})
export type SipLogin = typeof SipLogin.Type

export const Colleague = Schema.Struct({
  user_id: Schema.Int,
  name: Schema.String,
  email: Schema.NullOr(Schema.String),
  extension: Schema.NullOr(Schema.String),
  availability: Schema.String
})
export type Colleague = typeof Colleague.Type

export const CallStarted = Schema.Struct({
  call_id: Schema.Int,
  status: Schema.Literal("initiated")
})
export type CallStarted = typeof CallStarted.Type

/** Blank or null clears; the 3-4 digit rule is checked by the service so "off" can win over format (422 either way). */
export const SetExtension = Schema.Struct({
  extension: Schema.NullOr(Schema.String.check(
    Schema.isMaxLength(32, { message: "The extension must be 3 or 4 digits." })
  ))
})
export type SetExtension = typeof SetExtension.Type

export const InternalCall = Schema.Struct({
  callee_user_id: Schema.optional(Schema.NullOr(Schema.Int)),
  extension: Schema.optional(Schema.NullOr(Schema.String.check(
    Schema.isMaxLength(32, { message: "The extension must be 3 or 4 digits." })
  )))
})
export type InternalCall = typeof InternalCall.Type

export const ExternalCall = Schema.Struct({
  number: Schema.String.check(
    Schema.isMaxLength(32, { message: "The number field must be a valid phone number." })
  ),
  contact_id: Schema.optional(Schema.NullOr(Schema.Int))
})
export type ExternalCall = typeof ExternalCall.Type

const extensionPattern = /^[0-9]{3,4}$/

/** `null` for a blank value (clears), the trimmed digits when valid, `undefined` when malformed. */
export const normalizeExtension = (value: string | null | undefined): string | null | undefined => {
  const trimmed = (value ?? "").trim()
  if (trimmed === "") return null
  return extensionPattern.test(trimmed) ? trimmed : undefined
}

export const webUsername = (userId: number) => `agent-${userId}-web`
export const nativeUsername = (userId: number) => `agent-${userId}`

/** A generic `sip:` URI (RFC 3261 userinfo with password) that SIP apps import from a QR code. */
export const provisioningUri = (username: string, password: string, host: string, port: number) =>
  `sip:${encodeURIComponent(username)}:${encodeURIComponent(password)}@${host}:${port};transport=tcp`

import { Context, type Effect, Schema, Struct } from "effect"
import { CompanyId } from "../auth/Domain.ts"
import { keyInFlightMessage, keyMismatchCode, keyMismatchMessage, outcomeUnknownMessage } from "../platform/Idempotency.ts"
import { Attachment, type Message } from "./Domain.ts"

/** An attachment row before it has an id. */
export const OutgoingAttachment = Attachment.mapFields(Struct.omit(["id"]))
export type OutgoingAttachment = typeof OutgoingAttachment.Type

const NamedValue = Schema.Struct({ name: Schema.String, value: Schema.String })

/** The provider's side of a template send: its name and language there, and the named variables. */
export const OutgoingTemplate = Schema.Struct({
  name: Schema.String,
  language: Schema.String,
  header: Schema.Array(NamedValue),
  body: Schema.Array(NamedValue)
})
export type OutgoingTemplate = typeof OutgoingTemplate.Type

/** A send resolved to a thread and checked against the sending rules. */
export const SendRequest = Schema.Struct({
  /** `send`, `create`, `forward` or `send-template`: the idempotency scope and which refusal texts apply. */
  endpoint: Schema.Literals(["send", "create", "forward", "send-template"]),
  companyId: CompanyId,
  userId: Schema.Int,
  conversationId: Schema.Int,
  threadId: Schema.Int,
  channelId: Schema.Int,
  contactAccountId: Schema.NullOr(Schema.Int),
  /** The provider's chat or user id the message goes to. */
  recipient: Schema.String,
  externalThreadId: Schema.NullOr(Schema.String),
  messageType: Schema.String,
  text: Schema.NullOr(Schema.String),
  attachments: Schema.Array(OutgoingAttachment),
  quotedMessageId: Schema.NullOr(Schema.Int),
  quotedExternalMessageId: Schema.NullOr(Schema.String),
  metadata: Schema.Record(Schema.String, Schema.Unknown),
  idempotency: Schema.NullOr(Schema.Struct({ key: Schema.String, hash: Schema.String })),
  /** An approved template the provider sends instead of `text` (which keeps its rendered copy); no customer window applies. */
  template: Schema.optionalKey(OutgoingTemplate)
})
export type SendRequest = typeof SendRequest.Type

export const SendRefusalReason = Schema.Literals([
  "key_in_flight",
  "key_mismatch",
  "channel_not_connected",
  "contact_blocked",
  "window_closed",
  "no_recipient",
  "content_type_unsupported",
  "channel_not_textable",
  "outcome_unknown"
])
export type SendRefusalReason = typeof SendRefusalReason.Type

/**
 * Why a send was not made. Callers decide what a reason means to them (HTTP answers 409 or the
 * 422 rule body with `error_code`; a broadcast skips the recipient).
 */
export class SendRefusal extends Schema.TaggedError<SendRefusal>()("SendRefusal", {
  reason: SendRefusalReason,
  message: Schema.String,
  error_code: Schema.optional(Schema.String)
}) {
  static readonly keyInFlight = () => new SendRefusal({ reason: "key_in_flight", message: keyInFlightMessage })
  static readonly keyMismatch = () =>
    new SendRefusal({ reason: "key_mismatch", message: keyMismatchMessage, error_code: keyMismatchCode })
  /** The key's first send was cut off by a crash while the provider was being called. */
  static readonly outcomeUnknown = () => new SendRefusal({ reason: "outcome_unknown", message: outcomeUnknownMessage })
}

/** The lane could not take the send (its owner is moving or unreachable); nothing was sent. */
export class SendUnavailable extends Schema.TaggedError<SendUnavailable>()("SendUnavailable", {
  message: Schema.String
}) {}

/** The port: runs a send in its conversation's order, one at a time, whatever owns the conversation. */
export class SendLane extends Context.Service<SendLane, {
  run(request: SendRequest): Effect.Effect<Message, SendRefusal | SendUnavailable>
}>()("crm/messages/SendLane") {}

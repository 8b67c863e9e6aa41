import { Schema, Struct } from "effect"
import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { Attachment, Message } from "../src/messages/Domain.ts"

/** An attachment row before it has an id. */
export const OutgoingAttachment = Attachment.mapFields(Struct.omit(["id"]))
export type OutgoingAttachment = typeof OutgoingAttachment.Type

/** A send that the HTTP side has validated, resolved to a thread and checked against the sending rules. */
export const SendRequest = Schema.Struct({
  /** `send`, `create` or `forward`: the idempotency scope and which refusal codes apply. */
  endpoint: Schema.Literals(["send", "create", "forward"]),
  companyId: Schema.Int,
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
  idempotency: Schema.NullOr(Schema.Struct({ key: Schema.String, hash: Schema.String }))
})
export type SendRequest = typeof SendRequest.Type

/** A refusal decided inside the conversation; the HTTP side turns it into the wire error of `status`. */
export class SendRefused extends Schema.TaggedError<SendRefused>()("SendRefused", {
  status: Schema.Literals([404, 409, 422]),
  message: Schema.String,
  error_code: Schema.optional(Schema.String)
}) {}

export const Send = Rpc.make("Send", {
  payload: SendRequest,
  success: Message,
  error: SendRefused
})

/**
 * One per conversation (entity id = conversation id): owns the order of its outbound sends and the
 * idempotency of keys that are in flight.
 */
export const Conversation = Entity.make("Conversation", [Send])

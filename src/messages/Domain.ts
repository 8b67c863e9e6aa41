import { Schema } from "effect"

/**
 * The canonical `message_type` values (also `message.type` in `message.created`). Adapters map
 * their provider's kinds onto these; anything else is stored as `unsupported`.
 */
export const MessageTypes = [
  "text",
  "image",
  "video",
  "audio",
  "voice",
  "document",
  "sticker",
  "location",
  "contact",
  "reaction",
  "template",
  "ephemeral",
  "unsupported"
] as const
export type MessageType = typeof MessageTypes[number]

export const canonicalType = (value: string): MessageType =>
  (MessageTypes as ReadonlyArray<string>).includes(value) ? value as MessageType : "unsupported"

/** Attachment `type` values; the last three cannot be fetched (spec rule 5). */
export const AttachmentTypes = [
  "image",
  "video",
  "audio",
  "voice",
  "document",
  "sticker",
  "template",
  "ephemeral",
  "unsupported_type"
] as const

export const DeliveryStatuses = ["sent", "delivered", "read", "failed"] as const
export type DeliveryStatus = typeof DeliveryStatuses[number]

export const MessageId = Schema.Int
export const Direction = Schema.Literals(["inbound", "outbound"])

export const Attachment = Schema.Struct({
  id: Schema.Int,
  type: Schema.String,
  mime_type: Schema.NullOr(Schema.String),
  url: Schema.NullOr(Schema.String),
  thumbnail_url: Schema.NullOr(Schema.String),
  storage_path: Schema.NullOr(Schema.String),
  media_id: Schema.NullOr(Schema.Int),
  sticker_id: Schema.NullOr(Schema.Int),
  file_name: Schema.NullOr(Schema.String),
  size: Schema.NullOr(Schema.Int)
}).annotate({ identifier: "Attachment" })
export type Attachment = typeof Attachment.Type

/**
 * The message object. `status` is null for inbound messages, `pending` while the provider call of
 * an outbound message is in flight, then one of sent/delivered/read/failed.
 */
export const Message = Schema.Struct({
  id: MessageId,
  conversation_id: Schema.Int,
  thread_id: Schema.Int,
  channel_id: Schema.Int,
  direction: Direction,
  message_type: Schema.String,
  message_content: Schema.NullOr(Schema.String),
  external_message_id: Schema.NullOr(Schema.String),
  external_thread_id: Schema.NullOr(Schema.String),
  status: Schema.NullOr(Schema.String),
  sender_user_id: Schema.NullOr(Schema.Int),
  contact_account_id: Schema.NullOr(Schema.Int),
  quoted_message_id: Schema.NullOr(Schema.Int),
  timestamp: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String,
  edited_at: Schema.NullOr(Schema.String),
  deleted_at: Schema.NullOr(Schema.String),
  revoked_at: Schema.NullOr(Schema.String),
  can_edit_until: Schema.NullOr(Schema.String),
  can_revoke_until: Schema.NullOr(Schema.String),
  referral: Schema.NullOr(Schema.Record(Schema.String, Schema.Unknown)),
  attachments: Schema.Array(Attachment)
}).annotate({ identifier: "Message" })
export type Message = typeof Message.Type

export const StatusEntry = Schema.Struct({
  id: Schema.Int,
  message_id: Schema.Int,
  status: Schema.String,
  error: Schema.NullOr(Schema.String),
  created_at: Schema.String
})
export type StatusEntry = typeof StatusEntry.Type

export const Reaction = Schema.Struct({
  id: Schema.Int,
  message_id: Schema.Int,
  channel_id: Schema.Int,
  direction: Direction,
  reaction: Schema.String,
  author_user_id: Schema.NullOr(Schema.Int),
  author_contact_account_id: Schema.NullOr(Schema.Int),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "Reaction" })
export type Reaction = typeof Reaction.Type

// ---------------------------------------------------------------- requests

const Text = Schema.String.check(
  Schema.isMaxLength(4096, { message: "The text field must not be greater than 4096 characters." })
)

const ExternalRef = (field: string) =>
  Schema.String.check(
    Schema.isPattern(/\S/, { message: `The ${field} field must not be empty.` }),
    Schema.isMaxLength(255, { message: `The ${field} field must not be greater than 255 characters.` })
  )

/** A row of `attachments[]`: exactly one of `media_id` or `sticker_id` (checked by the service). */
export const AttachmentInput = Schema.Struct({
  media_id: Schema.optional(Schema.NullOr(Schema.Int)),
  sticker_id: Schema.optional(Schema.NullOr(Schema.Int)),
  type: Schema.optional(Schema.NullOr(Schema.Literals(["image", "video", "audio", "voice", "document", "sticker"]))),
  file_name: Schema.optional(Schema.NullOr(Schema.String.check(Schema.isMaxLength(255))))
})
export type AttachmentInput = typeof AttachmentInput.Type

const Attachments = Schema.Array(AttachmentInput).check(
  Schema.isMaxLength(10, { message: "The attachments field must not have more than 10 items." })
)

/** The optional `Idempotency-Key` header of send and send-template. */
export const IdempotencyKeyHeader = {
  "idempotency-key": Schema.optional(Schema.String.check(
    Schema.isPattern(/\S/, { message: "The Idempotency-Key header must not be empty." }),
    Schema.isMaxLength(128, { message: "The Idempotency-Key header must not be greater than 128 characters." })
  ))
}

/** Whom a send addresses on its channel: exactly one of these (checked by the service). */
export const sendTargetFields = {
  thread_id: Schema.optional(Schema.NullOr(Schema.Int)),
  contact_id: Schema.optional(Schema.NullOr(Schema.Int)),
  to: Schema.optional(Schema.NullOr(Schema.Struct({
    external_id: Schema.optional(Schema.NullOr(ExternalRef("to.external_id"))),
    phone: Schema.optional(Schema.NullOr(Schema.String.check(
      Schema.isMaxLength(64, { message: "The to.phone field must not be greater than 64 characters." })
    ))),
    username: Schema.optional(Schema.NullOr(ExternalRef("to.username")))
  })))
}
export type SendTarget = Schema.Struct<typeof sendTargetFields>["Type"]

export const SendMessage = Schema.Struct({
  channel_id: Schema.Int,
  ...sendTargetFields,
  text: Schema.optional(Schema.NullOr(Text)),
  attachments: Schema.optional(Schema.NullOr(Attachments)),
  sticker_id: Schema.optional(Schema.NullOr(Schema.Int))
})
export type SendMessage = typeof SendMessage.Type

const BodyKey = Schema.String.check(
  Schema.isPattern(/\S/, { message: "The idempotency key field must not be empty." }),
  Schema.isMaxLength(100, { message: "The idempotency key field must not be greater than 100 characters." })
)

export const CreateMessage = Schema.Struct({
  thread_id: Schema.Int,
  text: Schema.optional(Schema.NullOr(Text)),
  attachments: Schema.optional(Schema.NullOr(Attachments)),
  sticker_id: Schema.optional(Schema.NullOr(Schema.Int)),
  quoted_message_id: Schema.optional(Schema.NullOr(Schema.Int)),
  quoted_external_message_id: Schema.optional(Schema.NullOr(ExternalRef("quoted_external_message_id"))),
  idempotency_key: Schema.optional(Schema.NullOr(BodyKey))
})
export type CreateMessage = typeof CreateMessage.Type

export const UpdateMessage = Schema.Struct({
  text: Text.check(Schema.isPattern(/\S/, { message: "The text field is required." }))
})
export type UpdateMessage = typeof UpdateMessage.Type

/** The body is optional (the API also accepts an empty one, decoded as null: a soft delete). */
export const DeleteMessage = Schema.Struct({
  mode: Schema.optional(Schema.NullOr(Schema.Literals(["revoke"])))
})
export type DeleteMessage = typeof DeleteMessage.Type | null

export const RecordStatus = Schema.Struct({
  status: Schema.Literals(DeliveryStatuses),
  error: Schema.optional(Schema.NullOr(Schema.String.check(
    Schema.isMaxLength(1000, { message: "The error field must not be greater than 1000 characters." })
  )))
})
export type RecordStatus = typeof RecordStatus.Type

/** An operator's verdict on a send whose key answers `outcome_unknown` (checked in the provider's console). */
export const SettleKey = Schema.Struct({
  outcome: Schema.Literals(["sent", "not_sent"]),
  /** Which request's key, when several users or endpoints of the company used the same key value. */
  message_id: Schema.optional(Schema.NullOr(MessageId)),
  /** The provider's id of the message, so its later status webhooks find it. */
  external_message_id: Schema.optional(Schema.NullOr(ExternalRef("external_message_id")))
})
export type SettleKey = typeof SettleKey.Type

/** The path segment of a key to settle: what `Idempotency-Key` and `idempotency_key` accept. */
export const KeyParam = Schema.String.check(
  Schema.isMaxLength(128, { message: "The key must not be greater than 128 characters." })
)

export const SetReaction = Schema.Struct({
  reaction: Schema.String.check(
    Schema.isPattern(/\S/, { message: "The reaction field is required." }),
    Schema.isMaxCodePoints(32, { message: "The reaction field must not be greater than 32 characters." })
  ),
  author_user_id: Schema.optional(Schema.NullOr(Schema.Int)),
  author_contact_account_id: Schema.optional(Schema.NullOr(Schema.Int))
})
export type SetReaction = typeof SetReaction.Type

export const ForwardMessage = Schema.Struct({
  idempotency_key: Schema.optional(Schema.NullOr(BodyKey)),
  target_thread_id: Schema.optional(Schema.NullOr(Schema.Int)),
  target_contact_account_id: Schema.optional(Schema.NullOr(Schema.Int)),
  target_channel_id: Schema.optional(Schema.NullOr(Schema.Int))
})
export type ForwardMessage = typeof ForwardMessage.Type

export const SortBy = Schema.Literals(["id", "timestamp", "created_at", "updated_at"])
export type SortBy = typeof SortBy.Type
export const SortDir = Schema.Literals(["asc", "desc"])
export type SortDir = typeof SortDir.Type

const PositiveInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))
const PerPage = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))

/** Every filter and its alias; the service resolves the aliases (the explicit name wins). */
export const ListQuery = {
  conversation_id: Schema.optional(Schema.Int),
  thread_id: Schema.optional(Schema.Int),
  channel_id: Schema.optional(Schema.Int),
  direction: Schema.optional(Direction),
  message_type: Schema.optional(Schema.Literals(MessageTypes)),
  search: Schema.optional(Schema.String.check(Schema.isMaxLength(255))),
  q: Schema.optional(Schema.String.check(Schema.isMaxLength(255))),
  page: Schema.optional(PositiveInt),
  perPage: Schema.optional(PerPage),
  limit: Schema.optional(PerPage),
  before_message_id: Schema.optional(Schema.Int),
  after_message_id: Schema.optional(Schema.Int),
  before_id: Schema.optional(Schema.Int),
  after_id: Schema.optional(Schema.Int),
  sortBy: Schema.optional(SortBy),
  sortDir: Schema.optional(SortDir),
  order: Schema.optional(SortDir)
}

export const AroundQuery = {
  limit: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 50 })))
}

export const Around = Schema.Struct({
  items: Schema.Array(Message),
  anchor_id: Schema.Int,
  has_more_before: Schema.Boolean,
  has_more_after: Schema.Boolean
})

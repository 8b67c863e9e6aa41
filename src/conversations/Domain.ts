import { Schema } from "effect"

export const ConversationId = Schema.Int

/** The contact as a conversation list shows it; the contacts area owns the full record. */
export const ContactSummary = Schema.Struct({
  id: Schema.Int,
  firstName: Schema.NullOr(Schema.String),
  lastName: Schema.NullOr(Schema.String),
  displayName: Schema.NullOr(Schema.String),
  status: Schema.String,
  blocked_at: Schema.NullOr(Schema.String),
  opted_out_at: Schema.NullOr(Schema.String)
})

export const Thread = Schema.Struct({
  id: Schema.Int,
  conversation_id: Schema.Int,
  channel_id: Schema.Int,
  channel_type: Schema.String,
  contact_account_id: Schema.NullOr(Schema.Int),
  external_thread_id: Schema.NullOr(Schema.String),
  is_group: Schema.Boolean,
  last_inbound_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
})
export type Thread = typeof Thread.Type

export const Conversation = Schema.Struct({
  id: ConversationId,
  contact_id: Schema.Int,
  contact: ContactSummary,
  last_message_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "Conversation" })
export type Conversation = typeof Conversation.Type

/** One conversation: its contact and the threads on channels the caller may see. */
export const ConversationDetail = Schema.Struct({ ...Conversation.fields, threads: Schema.Array(Thread) }).annotate({ identifier: "ConversationDetail" })
export type ConversationDetail = typeof ConversationDetail.Type

export const ListQuery = {
  page: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  perPage: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 })))
}

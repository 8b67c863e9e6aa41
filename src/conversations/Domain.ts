import { Schema } from "effect"
import { PageInfo } from "../platform/Pagination.ts"

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

export const Statuses = ["open", "pending", "resolved", "snoozed"] as const
export const Status = Schema.Literals(Statuses)
export type Status = typeof Status.Type

export const Priorities = ["low", "medium", "high", "urgent"] as const
export const Priority = Schema.Literals(Priorities)
export type Priority = typeof Priority.Type

const Named = Schema.Struct({ id: Schema.Int, name: Schema.String })

export const LastMessage = Schema.Struct({
  id: Schema.Int,
  direction: Schema.String,
  type: Schema.String,
  /** The first 160 characters of the text, null for a message without text. */
  preview: Schema.NullOr(Schema.String),
  timestamp: Schema.String
})

export const Conversation = Schema.Struct({
  id: ConversationId,
  contact_id: Schema.Int,
  contact: ContactSummary,
  status: Status,
  snoozed_until: Schema.NullOr(Schema.String),
  priority: Schema.NullOr(Priority),
  assignee: Schema.NullOr(Named),
  team: Schema.NullOr(Named),
  last_message: Schema.NullOr(LastMessage),
  /** Inbound messages after the last one the caller marked read. */
  unread_count: Schema.Int,
  /** Since when the contact has waited for an answer: their oldest message after the last outbound one. */
  waiting_since: Schema.NullOr(Schema.String),
  first_reply_at: Schema.NullOr(Schema.String),
  last_message_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "Conversation" })
export type Conversation = typeof Conversation.Type

/** One conversation: its contact and the threads on channels the caller may see. */
export const ConversationDetail = Schema.Struct({ ...Conversation.fields, threads: Schema.Array(Thread) }).annotate({ identifier: "ConversationDetail" })
export type ConversationDetail = typeof ConversationDetail.Type

const FlagText = Schema.Literals(["true", "false", "1", "0"])

export const ListQuery = {
  page: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  perPage: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))),
  /** `next_cursor` of the previous page; replaces `page`. */
  cursor: Schema.optional(Schema.String.check(Schema.isMaxLength(200))),
  status: Schema.optional(Schema.Literals([...Statuses, "all"])),
  /** `me`, `unassigned`, `assigned` or a member's id. */
  assignee: Schema.optional(Schema.String.check(
    Schema.isPattern(/^(me|unassigned|assigned|[1-9]\d{0,14})$/, { message: "The assignee must be me, unassigned, assigned or a member id." })
  )),
  team_id: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  channel_id: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  priority: Schema.optional(Schema.Literals([...Priorities, "none"])),
  unread: Schema.optional(FlagText),
  q: Schema.optional(Schema.String.check(Schema.isMaxLength(255)))
}

export interface ListFilters {
  readonly status?: Status | "all" | undefined
  readonly assignee?: string | undefined
  readonly team_id?: number | undefined
  readonly channel_id?: number | undefined
  readonly priority?: Priority | "none" | undefined
  readonly unread?: "true" | "false" | "1" | "0" | undefined
  readonly q?: string | undefined
}

export const Meta = Schema.Struct({
  /** Under the list's filters other than `assignee`: assigned to the caller, to nobody, and all. */
  mine: Schema.Int,
  unassigned: Schema.Int,
  all: Schema.Int
})

export const ConversationList = Schema.Struct({
  items: Schema.Array(Conversation),
  pagination: PageInfo,
  meta: Meta,
  /** Pass as `cursor` for the next page; null on the last page. */
  next_cursor: Schema.NullOr(Schema.String)
})
export type ConversationList = typeof ConversationList.Type

const Instant = Schema.String.check(
  Schema.isPattern(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})$/, {
    message: "The snoozed until field must be an ISO 8601 date-time with a zone."
  })
)

export const AssignInput = Schema.Struct({
  /** A member who sees one of the conversation's channels through their teams; null unassigns. */
  assignee_id: Schema.optional(Schema.NullOr(Schema.Int)),
  /** null removes the team. */
  team_id: Schema.optional(Schema.NullOr(Schema.Int))
})
export type AssignInput = typeof AssignInput.Type

export const StatusInput = Schema.Struct({
  status: Status,
  /** Required with `snoozed`, in the future; the conversation reopens then (or on the contact's next message). */
  snoozed_until: Schema.optional(Schema.NullOr(Instant))
})
export type StatusInput = typeof StatusInput.Type

export const PriorityInput = Schema.Struct({ priority: Schema.NullOr(Priority) })
export type PriorityInput = typeof PriorityInput.Type

export const ReadInput = Schema.Struct({
  /** Up to and including this message; the conversation's last message when left out. */
  message_id: Schema.optional(Schema.Int)
})
export type ReadInput = typeof ReadInput.Type

import { Schema } from "effect"

export const BroadcastId = Schema.Int
export const RunId = Schema.Int

const Hhmm = Schema.String.check(Schema.isPattern(/^([01]\d|2[0-3]):[0-5]\d$/, { message: "The time must be HH:MM." }))
const ShortText = Schema.String.check(Schema.isMaxLength(4096))

export const Variant = Schema.Struct({ key: Schema.String.check(Schema.isPattern(/^[A-Za-z0-9_-]{1,20}$/)), text: ShortText })

/**
 * One channel's content. For `template`: `templateId` (group or instance id), optional
 * `language` and `variables` (values may use `{{first_name}}`-style contact variables).
 */
export const ChannelContent = Schema.Struct({
  type: Schema.Literals(["text", "template"]),
  channelId: Schema.Int,
  accountType: Schema.optional(Schema.NullOr(Schema.String)),
  text: Schema.optional(Schema.NullOr(ShortText)),
  variants: Schema.optional(Schema.NullOr(Schema.Array(Variant))),
  templateId: Schema.optional(Schema.NullOr(Schema.Int)),
  language: Schema.optional(Schema.NullOr(Schema.String.check(Schema.isMaxLength(12)))),
  variables: Schema.optional(Schema.NullOr(Schema.Record(Schema.String, Schema.String.check(Schema.isMaxLength(1024)))))
})
export type ChannelContent = typeof ChannelContent.Type

export const ContentSettings = Schema.Struct({
  trackClicks: Schema.optional(Schema.Boolean),
  includeOptOut: Schema.optional(Schema.Boolean),
  optOutText: Schema.optional(Schema.NullOr(Schema.String.check(Schema.isMaxLength(500))))
})

export const Content = Schema.Struct({
  channels: Schema.Array(ChannelContent),
  settings: Schema.optional(ContentSettings)
})
export type Content = typeof Content.Type

export const RateControl = Schema.Struct({
  enabled: Schema.optional(Schema.Boolean),
  messagesPerMinute: Schema.optional(Schema.NullOr(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100_000 })))),
  jitterMinSeconds: Schema.optional(Schema.NullOr(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 3600 })))),
  jitterMaxSeconds: Schema.optional(Schema.NullOr(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 3600 })))),
  dailyLimit: Schema.optional(Schema.NullOr(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)))),
  skipContactedWithinHours: Schema.optional(Schema.NullOr(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 8760 }))))
})
export type RateControl = typeof RateControl.Type

export const SendWindow = Schema.Struct({
  enabled: Schema.optional(Schema.Boolean),
  mode: Schema.optional(Schema.NullOr(Schema.Literals(["fixed", "smart"]))),
  startTime: Schema.optional(Schema.NullOr(Hhmm)),
  endTime: Schema.optional(Schema.NullOr(Hhmm)),
  timezone: Schema.optional(Schema.NullOr(Schema.String))
})
export type SendWindow = typeof SendWindow.Type

export const Schedule = Schema.Struct({
  mode: Schema.Literals(["now", "later"]),
  scheduledAt: Schema.optional(Schema.NullOr(Schema.String)),
  rateControl: Schema.optional(Schema.NullOr(RateControl)),
  sendWindow: Schema.optional(Schema.NullOr(SendWindow))
})
export type Schedule = typeof Schedule.Type

/** Our shape for the spec's unshown recurrence: an RFC 5545 RRULE and the zone it is read in. */
export const Recurrence = Schema.Struct({
  rrule: Schema.String.check(Schema.isMaxLength(1000)),
  timezone: Schema.optional(Schema.NullOr(Schema.String))
})
export type Recurrence = typeof Recurrence.Type

export const BroadcastInput = Schema.Struct({
  name: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(255)),
  is_draft: Schema.optional(Schema.Boolean),
  audience: Schema.Struct({ segmentId: Schema.String }),
  channels: Schema.Struct({ mode: Schema.Literal("specific"), channelIds: Schema.Array(Schema.Int).check(Schema.isMinLength(1)) }),
  content: Content,
  schedule: Schedule,
  recurrence: Schema.optional(Schema.NullOr(Recurrence))
})
export type BroadcastInput = typeof BroadcastInput.Type

export const BroadcastPatch = Schema.Struct({
  name: Schema.optional(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(255))),
  audience: Schema.optional(Schema.Struct({ segmentId: Schema.String })),
  channels: Schema.optional(Schema.Struct({ mode: Schema.Literal("specific"), channelIds: Schema.Array(Schema.Int).check(Schema.isMinLength(1)) })),
  content: Schema.optional(Content),
  schedule: Schema.optional(Schedule),
  recurrence: Schema.optional(Schema.NullOr(Recurrence))
})
export type BroadcastPatch = typeof BroadcastPatch.Type

export const BroadcastStatus = Schema.Literals(["draft", "scheduled", "active", "completed", "failed", "cancelled"])
export type BroadcastStatus = typeof BroadcastStatus.Type
export const RunStatus = Schema.Literals(["processing", "paused", "completed", "cancelled", "failed"])
export type RunStatus = typeof RunStatus.Type

const Counts = {
  total: Schema.Int,
  sent: Schema.Int,
  delivered: Schema.Int,
  read: Schema.Int,
  failed: Schema.Int,
  skipped: Schema.Int
}

export const Run = Schema.Struct({
  id: RunId,
  broadcast_id: BroadcastId,
  status: RunStatus,
  ...Counts,
  pending: Schema.Int,
  started_at: Schema.String,
  completed_at: Schema.NullOr(Schema.String)
})
export type Run = typeof Run.Type

export const Stats = Schema.Struct({
  ...Counts,
  clicked: Schema.Int,
  replied: Schema.Int,
  byVariant: Schema.Record(Schema.String, Schema.Struct({ ...Counts, clicked: Schema.Int, replied: Schema.Int }))
})
export type Stats = typeof Stats.Type

export const Broadcast = Schema.Struct({
  id: BroadcastId,
  company_id: Schema.Int,
  name: Schema.String,
  status: BroadcastStatus,
  audience: Schema.Struct({ segmentId: Schema.NullOr(Schema.String), conditions: Schema.Array(Schema.Unknown), group_logic: Schema.NullOr(Schema.String) }),
  channels: Schema.Array(Schema.Struct({ id: Schema.Int, mode: Schema.String })),
  content: Schema.Unknown,
  schedule: Schema.Unknown,
  recurring_schedule: Schema.NullOr(Schema.Struct({
    rrule: Schema.String,
    timezone: Schema.String,
    paused: Schema.Boolean,
    next_run_at: Schema.NullOr(Schema.String)
  })),
  runs: Schema.Array(Run),
  stats: Stats,
  created_at: Schema.String,
  updated_at: Schema.String
})
export type Broadcast = typeof Broadcast.Type

export const Recipient = Schema.Struct({
  id: Schema.Int,
  run_id: Schema.Int,
  contact_id: Schema.Int,
  identifier: Schema.String,
  status: Schema.String,
  error_message: Schema.NullOr(Schema.String),
  attempts: Schema.Int,
  variant_key: Schema.NullOr(Schema.String),
  sent_at: Schema.NullOr(Schema.String),
  delivered_at: Schema.NullOr(Schema.String),
  read_at: Schema.NullOr(Schema.String),
  replied_at: Schema.NullOr(Schema.String),
  clicked_at: Schema.NullOr(Schema.String),
  contact: Schema.Struct({ id: Schema.Int, display_name: Schema.NullOr(Schema.String), first_name: Schema.NullOr(Schema.String), last_name: Schema.NullOr(Schema.String) }),
  channel: Schema.Struct({ id: Schema.Int, name: Schema.String })
})
export type Recipient = typeof Recipient.Type

export const EstimateInput = Schema.Struct({
  segment_id: Schema.String,
  channel_ids: Schema.Array(Schema.Int).check(Schema.isMinLength(1)),
  schedule: Schema.optional(Schema.NullOr(Schedule))
})
export type EstimateInput = typeof EstimateInput.Type

/** A selected channel's WhatsApp messaging limit against the audience: how many reachable recipients it would leave out now. */
export const MessagingLimitOutlook = Schema.Struct({
  channel_id: Schema.Int,
  limit: Schema.Int,
  contacted_last_24h: Schema.Int,
  remaining: Schema.Int,
  beyond: Schema.Int
})

export const Estimate = Schema.Struct({
  total_contacts: Schema.Int,
  reachable_contacts: Schema.Int,
  excluded_contacts: Schema.Int,
  estimated_duration_seconds: Schema.Int,
  estimated_completion: Schema.String,
  messaging_limits: Schema.Array(MessagingLimitOutlook)
})
export type Estimate = typeof Estimate.Type

export const TestInput = Schema.Struct({
  channel_id: Schema.Int,
  recipient: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(255)),
  content: Schema.Struct({ type: Schema.Literal("text"), text: ShortText })
})

export const AssistInput = Schema.Struct({
  action: Schema.Literals(["generate", "improve"]),
  text: Schema.String.check(Schema.isMaxLength(4000)),
  locale: Schema.optional(Schema.NullOr(Schema.String.check(Schema.isMaxLength(16))))
})
export type AssistInput = typeof AssistInput.Type

export const AssistOutput = Schema.Struct({ text: Schema.String, action: Schema.String, tokens_used: Schema.Int })

export const Meta = Schema.Struct({
  segments: Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String })),
  variables: Schema.Array(Schema.String),
  templates: Schema.Array(Schema.Unknown)
})

export const defaultOptOutText = "Reply STOP to unsubscribe"
export const contactVariables = ["first_name", "last_name", "display_name", "company_name"] as const

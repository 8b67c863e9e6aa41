import { Schema } from "effect"

export const ExportId = Schema.Int
export type ExportId = typeof ExportId.Type

export const ExportTypes = ["contacts", "messages", "segments"] as const
export type ExportType = typeof ExportTypes[number]
export const ExportFormats = ["csv", "xlsx", "json"] as const
export type ExportFormat = typeof ExportFormats[number]
export const ExportStatuses = ["pending", "processing", "completed", "failed", "expired"] as const
export type ExportStatus = typeof ExportStatuses[number]

/** The channel types a contact account can have: what `account_type` filters by. */
export const AccountTypes = ["msgr_a", "msgr_a_business", "msgr_b", "msgr_c_business"] as const

const Id = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))
/** Segments have string ids on the wire (`SegmentId`); numbers are accepted too. */
const SegmentRef = Schema.Union([Id, Schema.String])

export const ExportFilters = Schema.Struct({
  account_type: Schema.optional(Schema.Literals(AccountTypes)),
  segment_id: Schema.optional(SegmentRef),
  segment_ids: Schema.optional(Schema.Array(SegmentRef).check(Schema.isMaxLength(50))),
  date_from: Schema.optional(Schema.String),
  date_to: Schema.optional(Schema.String),
  channel_id: Schema.optional(Id),
  direction: Schema.optional(Schema.Literals(["inbound", "outbound"])),
  conversation_id: Schema.optional(Id),
  group_chat_id: Schema.optional(Id)
})
export type ExportFilters = typeof ExportFilters.Type

export const ExportInput = Schema.Struct({
  type: Schema.Literals(ExportTypes),
  format: Schema.Literals(ExportFormats),
  name: Schema.optional(Schema.NullOr(Schema.String.check(
    Schema.isMaxLength(255, { message: "The name field must not be greater than 255 characters." })
  ))),
  filters: Schema.optional(Schema.NullOr(ExportFilters))
})
export type ExportInput = typeof ExportInput.Type

export const Export = Schema.Struct({
  id: ExportId,
  uuid: Schema.String,
  type: Schema.Literals(ExportTypes),
  name: Schema.String,
  format: Schema.Literals(ExportFormats),
  status: Schema.Literals(ExportStatuses),
  filters: Schema.Record(Schema.String, Schema.Unknown),
  row_count: Schema.Int,
  file_size: Schema.NullOr(Schema.Int),
  error_message: Schema.NullOr(Schema.String),
  /** Signed, no header needed; only while completed. */
  download_url: Schema.NullOr(Schema.String),
  expires_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "Export" })
export type Export = typeof Export.Type

/** Spec limits: exports a company may start per (UTC) day. */
export const dailyLimit = 20
export const dailyMessagesLimit = 5
/** How long a finished file stays downloadable. */
export const retentionDays = 7

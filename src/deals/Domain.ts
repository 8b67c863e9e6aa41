import { Schema } from "effect"
import { FreeForm } from "../platform/FreeForm.ts"

export const Id = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

const text = (field: string, max: number) =>
  Schema.String.check(
    Schema.isMaxLength(max, { message: `The ${field} field must not be greater than ${max} characters.` })
  )
const required = (field: string, max: number) =>
  text(field, max).check(Schema.isPattern(/\S/, { message: `The ${field} field is required.` }))
const Order = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1_000_000 }))

/** ISO 8601 instant, checked for a real date (PostgreSQL never sees `2026-13-40`). */
export const Instant = (field: string) =>
  Schema.String.check(Schema.makeFilter((value: string) =>
    (/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(value) && !Number.isNaN(Date.parse(value))) ||
    `The ${field} field must be a valid date.`
  ))
const Day = (field: string) =>
  Schema.String.check(Schema.makeFilter((value: string) =>
    (/^\d{4}-\d{2}-\d{2}$/.test(value) && !Number.isNaN(Date.parse(value)) && new Date(value).toISOString().startsWith(value)) ||
    `The ${field} field must be a date (YYYY-MM-DD).`
  ))

/** Up to 18 integer digits and 2 decimals, as a string: amounts never pass through a float. */
export const Amount = Schema.String.check(
  Schema.isPattern(/^\d{1,18}(\.\d{1,2})?$/, { message: "The amount must be a decimal string with up to 2 decimals, such as \"1500.00\"." })
)
export const Currency = Schema.String.check(
  Schema.isPattern(/^[A-Z]{3}$/, { message: "The currency must be a 3-letter ISO 4217 code." })
)

// ── Funnels and stages ──────────────────────────────────────────────────────────────────

export const StageTypes = ["open", "success", "failed"] as const
export type StageType = typeof StageTypes[number]
export const StageType = Schema.Literals(StageTypes)

export const Stage = Schema.Struct({
  id: Schema.Int,
  funnel_id: Schema.Int,
  name: Schema.String,
  type: StageType,
  order: Schema.Int
}).annotate({ identifier: "Stage" })
export type Stage = typeof Stage.Type

export const Funnel = Schema.Struct({
  id: Schema.Int,
  company_id: Schema.Int,
  name: Schema.String,
  is_default: Schema.Boolean,
  order: Schema.Int,
  stages: Schema.Array(Stage)
}).annotate({ identifier: "Funnel" })
export type Funnel = typeof Funnel.Type

export const StageInput = Schema.Struct({
  name: required("name", 100),
  type: StageType,
  order: Schema.optional(Order)
})
export type StageInput = typeof StageInput.Type

export const StagePatch = Schema.Struct({
  name: Schema.optional(required("name", 100)),
  type: Schema.optional(StageType),
  order: Schema.optional(Order)
})
export type StagePatch = typeof StagePatch.Type

/** Without `stages`, a funnel starts with New (open), Won (success) and Lost (failed). */
export const FunnelInput = Schema.Struct({
  name: required("name", 100),
  is_default: Schema.optional(Schema.Boolean),
  order: Schema.optional(Order),
  stages: Schema.optional(Schema.Array(StageInput).check(
    Schema.isMaxLength(50, { message: "The stages field must not have more than 50 items." })
  ))
})
export type FunnelInput = typeof FunnelInput.Type

export const FunnelPatch = Schema.Struct({
  name: Schema.optional(required("name", 100)),
  is_default: Schema.optional(Schema.Boolean),
  order: Schema.optional(Order)
})
export type FunnelPatch = typeof FunnelPatch.Type

// ── Deal types and lost reasons ─────────────────────────────────────────────────────────

export const DealType = Schema.Struct({ id: Schema.Int, name: Schema.String, order: Schema.Int }).annotate({ identifier: "DealType" })
export type DealType = typeof DealType.Type

export const DealTypeInput = Schema.Struct({ name: required("name", 100), order: Schema.optional(Order) })
export type DealTypeInput = typeof DealTypeInput.Type
export const DealTypePatch = Schema.Struct({ name: Schema.optional(required("name", 100)), order: Schema.optional(Order) })
export type DealTypePatch = typeof DealTypePatch.Type

export const LostReason = Schema.Struct({
  id: Schema.Int,
  company_id: Schema.Int,
  name: Schema.String,
  is_active: Schema.Boolean,
  order: Schema.Int,
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "LostReason" })
export type LostReason = typeof LostReason.Type

export const LostReasonInput = Schema.Struct({
  name: required("name", 100),
  is_active: Schema.optional(Schema.Boolean),
  order: Schema.optional(Order)
})
export type LostReasonInput = typeof LostReasonInput.Type
export const LostReasonPatch = Schema.Struct({
  name: Schema.optional(required("name", 100)),
  is_active: Schema.optional(Schema.Boolean),
  order: Schema.optional(Order)
})
export type LostReasonPatch = typeof LostReasonPatch.Type

// ── Deals ───────────────────────────────────────────────────────────────────────────────

export const DealStatuses = ["open", "won", "lost"] as const
export type DealStatus = typeof DealStatuses[number]
export const DealStatus = Schema.Literals(DealStatuses)

export const CustomFields = Schema.Record(Schema.String, Schema.Unknown)

const dealFields = {
  id: Schema.Int,
  company_id: Schema.Int,
  contact_id: Schema.Int,
  funnel_id: Schema.Int,
  funnel_stage_id: Schema.Int,
  conversation_id: Schema.NullOr(Schema.Int),
  title: Schema.String,
  amount: Schema.String,
  currency: Schema.String,
  status: DealStatus,
  type_id: Schema.NullOr(Schema.Int),
  source: Schema.String,
  utm_source: Schema.NullOr(Schema.String),
  utm_medium: Schema.NullOr(Schema.String),
  utm_campaign: Schema.NullOr(Schema.String),
  probability: Schema.NullOr(Schema.Int),
  comments: Schema.NullOr(Schema.String),
  begin_date: Schema.NullOr(Schema.String),
  expected_close_date: Schema.NullOr(Schema.String),
  channel: Schema.NullOr(Schema.String),
  custom_fields: CustomFields,
  responsible_user_id: Schema.NullOr(Schema.Int),
  closed_at: Schema.NullOr(Schema.String),
  lost_reason: Schema.NullOr(Schema.String),
  lost_reason_id: Schema.NullOr(Schema.Int),
  closed_amount: Schema.NullOr(Schema.String),
  closed_currency: Schema.NullOr(Schema.String),
  stage_changed_at: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String,
  deleted_at: Schema.NullOr(Schema.String)
}

export const Deal = Schema.Struct(dealFields).annotate({ identifier: "Deal" })
export type Deal = typeof Deal.Type

type Optionals<F> = { readonly [K in keyof F]: K extends "id" ? F[K] : Schema.optionalKey<F[K] & Schema.Top> }

/** What `POST /v1/deals/{deal}` answers: the id and every field whose value changed. */
export const DealChanges = Schema.Struct(
  Object.fromEntries(
    Object.entries(dealFields).map(([key, schema]) => [key, key === "id" ? schema : Schema.optionalKey(schema)])
  ) as unknown as Optionals<typeof dealFields>
)
export type DealChanges = Partial<Deal> & { readonly id: number }

const nullableText = (field: string, max = 255) => Schema.optional(Schema.NullOr(text(field, max)))

const editableFields = {
  title: Schema.optional(required("title", 255)),
  amount: Schema.optional(Amount),
  currency: Schema.optional(Currency),
  type_id: Schema.optional(Schema.NullOr(Schema.Int)),
  source: Schema.optional(required("source", 100)),
  utm_source: nullableText("utm_source"),
  utm_medium: nullableText("utm_medium"),
  utm_campaign: nullableText("utm_campaign"),
  probability: Schema.optional(Schema.NullOr(Schema.Int.check(
    Schema.isBetween({ minimum: 0, maximum: 100 }, { message: "The probability must be between 0 and 100." })
  ))),
  comments: nullableText("comments", 10_000),
  begin_date: Schema.optional(Schema.NullOr(Day("begin_date"))),
  expected_close_date: Schema.optional(Schema.NullOr(Day("expected_close_date"))),
  channel: nullableText("channel", 100),
  custom_fields: Schema.optional(Schema.NullOr(FreeForm("custom_fields"))),
  responsible_user_id: Schema.optional(Schema.Int),
  conversation_id: Schema.optional(Schema.NullOr(Schema.Int)),
  funnel_id: Schema.optional(Schema.Int),
  funnel_stage_id: Schema.optional(Schema.Int),
  status: Schema.optional(DealStatus),
  lost_reason_id: Schema.optional(Schema.NullOr(Schema.Int)),
  lost_reason: nullableText("lost_reason", 255)
}

export const CreateDeal = Schema.Struct({ ...editableFields, contact_id: Schema.Int, title: required("title", 255) })
export type CreateDeal = typeof CreateDeal.Type

export const UpdateDeal = Schema.Struct({ ...editableFields, contact_id: Schema.optional(Schema.Int) })
export type UpdateDeal = typeof UpdateDeal.Type

const PerPage = Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 })))
const Page = Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)))
export const Flag = Schema.Literals(["0", "1", "true", "false"])

export const DealListQuery = {
  page: Page,
  perPage: PerPage,
  funnel_id: Schema.optional(Schema.Int),
  funnel_stage_id: Schema.optional(Schema.Int),
  status: Schema.optional(DealStatus),
  contact_id: Schema.optional(Schema.Int),
  responsible_user_id: Schema.optional(Schema.Int)
}
export type DealListQuery = Schema.Struct<typeof DealListQuery>["Type"]

export const PageQuery = { page: Page, perPage: PerPage }
export type PageQuery = Schema.Struct<typeof PageQuery>["Type"]

// ── Timeline ────────────────────────────────────────────────────────────────────────────

export const ActivityTypes = [
  "created",
  "stage_changed",
  "field_changed",
  "note",
  "task_created",
  "task_completed",
  "won",
  "lost",
  "responsible_changed",
  "system"
] as const
export type ActivityType = typeof ActivityTypes[number]

export const ActivityActor = Schema.Struct({ id: Schema.Int, name: Schema.String, lastname: Schema.NullOr(Schema.String) })

export const Activity = Schema.Struct({
  id: Schema.Int,
  deal_id: Schema.Int,
  type: Schema.Literals(ActivityTypes),
  actor_user_id: Schema.NullOr(Schema.Int),
  body: Schema.NullOr(Schema.String),
  metadata: Schema.NullOr(Schema.Record(Schema.String, Schema.Unknown)),
  created_at: Schema.String,
  actor: Schema.NullOr(ActivityActor)
})
export type Activity = typeof Activity.Type

export const NoteInput = Schema.Struct({ body: required("body", 10_000) })
export type NoteInput = typeof NoteInput.Type

// ── Tasks ───────────────────────────────────────────────────────────────────────────────

export const TaskTypes = ["call", "meeting", "follow_up", "email", "other"] as const
export const TaskType = Schema.Literals(TaskTypes)
export const TaskStatuses = ["open", "done", "cancelled"] as const
export type TaskStatus = typeof TaskStatuses[number]
export const TaskStatus = Schema.Literals(TaskStatuses)

export const Task = Schema.Struct({
  id: Schema.Int,
  company_id: Schema.Int,
  deal_id: Schema.Int,
  contact_id: Schema.Int,
  type: TaskType,
  title: Schema.String,
  description: Schema.NullOr(Schema.String),
  due_at: Schema.NullOr(Schema.String),
  remind_at: Schema.NullOr(Schema.String),
  status: TaskStatus,
  assigned_user_id: Schema.NullOr(Schema.Int),
  completed_at: Schema.NullOr(Schema.String),
  overdue: Schema.Boolean,
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "Task" })
export type Task = typeof Task.Type

export const CreateTask = Schema.Struct({
  deal_id: Schema.Int,
  type: Schema.optional(TaskType),
  title: required("title", 255),
  description: nullableText("description", 10_000),
  due_at: Schema.optional(Schema.NullOr(Instant("due_at"))),
  remind_at: Schema.optional(Schema.NullOr(Instant("remind_at"))),
  assigned_user_id: Schema.optional(Schema.Int)
})
export type CreateTask = typeof CreateTask.Type

export const UpdateTask = Schema.Struct({
  type: Schema.optional(TaskType),
  title: Schema.optional(required("title", 255)),
  description: nullableText("description", 10_000),
  due_at: Schema.optional(Schema.NullOr(Instant("due_at"))),
  remind_at: Schema.optional(Schema.NullOr(Instant("remind_at"))),
  assigned_user_id: Schema.optional(Schema.Int),
  status: Schema.optional(TaskStatus)
})
export type UpdateTask = typeof UpdateTask.Type

export const TaskListQuery = {
  page: Page,
  perPage: PerPage,
  status: Schema.optional(TaskStatus),
  assigned_user_id: Schema.optional(Schema.Int),
  deal_id: Schema.optional(Schema.Int),
  overdue: Schema.optional(Flag),
  mine: Schema.optional(Flag)
}
export type TaskListQuery = Schema.Struct<typeof TaskListQuery>["Type"]

// ── Settings ────────────────────────────────────────────────────────────────────────────

export const defaultTitleTemplate = "{{contact_name}} ({{channel_name}})"

export const DealSettings = Schema.Struct({
  auto_create_deal_enabled: Schema.Boolean,
  default_funnel_id: Schema.NullOr(Schema.Int),
  default_deal_title_template: Schema.String,
  default_currency: Schema.String,
  has_funnels: Schema.Boolean
}).annotate({ identifier: "DealSettings" })
export type DealSettings = typeof DealSettings.Type

export const DealSettingsInput = Schema.Struct({
  auto_create_deal_enabled: Schema.optional(Schema.Boolean),
  default_funnel_id: Schema.optional(Schema.NullOr(Schema.Int)),
  default_deal_title_template: Schema.optional(Schema.NullOr(required("default_deal_title_template", 255))),
  default_currency: Schema.optional(Schema.NullOr(Currency))
})
export type DealSettingsInput = typeof DealSettingsInput.Type

export const Message = Schema.Struct({ message: Schema.String })

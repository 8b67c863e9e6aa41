import { Schema } from "effect"
import { pageQuery } from "../platform/Pagination.ts"

export const AutomationId = Schema.String.check(Schema.isUUID())
export const RunId = Schema.String.check(Schema.isUUID())

export const Statuses = ["draft", "active", "paused", "archived"] as const
export const AutomationStatus = Schema.Literals(Statuses).annotate({
  message: "The selected status is invalid: draft, active, paused or archived."
})
export type AutomationStatus = typeof AutomationStatus.Type

export const HealthStatus = Schema.Literals(["ok", "degraded", "failing"])

export const TriggerEvents = [
  "message.created",
  "conversation.created",
  "contact.created",
  "contact.updated",
  "deal.created",
  "deal.stage_changed",
  "tag.added"
] as const
export type TriggerEvent = typeof TriggerEvents[number]

export const ConditionTypes = [
  "text_contains",
  "text_equals",
  "text_matches",
  "message_type",
  "is_first_message",
  "has_tag",
  "contact_field_equals",
  "deal_stage_is"
] as const
export type ConditionType = typeof ConditionTypes[number]

const text = (field: string, max: number) =>
  Schema.String.check(Schema.isMaxLength(max, { message: `The ${field} must not be greater than ${max} characters.` }))

const Name = Schema.String.check(
  Schema.isPattern(/\S/, { message: "The name field is required." }),
  Schema.isMaxLength(255, { message: "The name must not be greater than 255 characters." })
)

/** A condition of a trigger or of a `condition` node; `field` names the contact field of `contact_field_equals`. */
export const Condition = Schema.Struct({
  type: Schema.Literals(ConditionTypes).annotate({ message: `The condition type must be one of: ${ConditionTypes.join(", ")}.` }),
  value: Schema.optional(Schema.Union([Schema.String, Schema.Number, Schema.Boolean, Schema.Null])),
  field: Schema.optional(text("field", 64))
})
export type Condition = typeof Condition.Type

export const Joiner = Schema.Literals(["and", "or"]).annotate({ message: "The conditionsJoiner must be and or or." })

export const Trigger = Schema.Struct({
  id: text("id", 64),
  channelType: Schema.optional(Schema.NullOr(Schema.Literals(["msgr_a", "msgr_a_business", "msgr_b", "msgr_c_business"]))),
  channels: Schema.optional(Schema.Array(Schema.Int).check(Schema.isMaxLength(100))),
  event: Schema.Literals(TriggerEvents).annotate({ message: `The event must be one of: ${TriggerEvents.join(", ")}.` }),
  conditionsJoiner: Schema.optional(Joiner),
  conditions: Schema.optional(Schema.Array(Condition).check(Schema.isMaxLength(50)))
})
export type Trigger = typeof Trigger.Type

const Json = Schema.Record(Schema.String, Schema.Unknown)

export const Node = Schema.Struct({
  id: text("id", 64),
  type: Schema.Literals(["trigger", "action"]),
  position: Schema.optional(Schema.Struct({ x: Schema.Number, y: Schema.Number })),
  actionId: Schema.optional(Schema.NullOr(text("actionId", 64))),
  data: Schema.optional(Schema.NullOr(Json))
})
export type Node = typeof Node.Type

export const Edge = Schema.Struct({
  id: text("id", 64),
  source: text("source", 64),
  target: text("target", 64),
  label: Schema.optional(Schema.NullOr(text("label", 255))),
  sourceHandle: Schema.optional(Schema.NullOr(text("sourceHandle", 64))),
  targetHandle: Schema.optional(Schema.NullOr(text("targetHandle", 64))),
  data: Schema.optional(Schema.NullOr(Json))
})
export type Edge = typeof Edge.Type

export const Graph = Schema.Struct({
  nodes: Schema.Array(Node).check(
    Schema.isMinLength(1, { message: "The nodes field must have at least 1 items." }),
    Schema.isMaxLength(200, { message: "The nodes field must not have more than 200 items." })
  ),
  edges: Schema.optional(Schema.Array(Edge).check(Schema.isMaxLength(500))),
  triggers: Schema.optional(Schema.Array(Trigger).check(Schema.isMaxLength(20)))
})
export type Graph = typeof Graph.Type

export interface StoredGraph {
  readonly nodes: ReadonlyArray<Node>
  readonly edges: ReadonlyArray<Edge>
  readonly triggers: ReadonlyArray<Trigger>
}

export const Automation = Schema.Struct({
  id: Schema.String,
  companyId: Schema.Int,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  status: AutomationStatus,
  healthStatus: HealthStatus,
  activeVersionId: Schema.NullOr(Schema.String),
  latestVersionId: Schema.NullOr(Schema.String),
  templateId: Schema.NullOr(Schema.String),
  executionsCount: Schema.Int,
  lastRunAt: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String,
  createdBy: Schema.NullOr(Schema.Int),
  updatedBy: Schema.NullOr(Schema.Int)
})
export type Automation = typeof Automation.Type

/** One automation with the graph of its latest version (empty before the first builder save). */
export const AutomationDetail = Schema.Struct({
  ...Automation.fields,
  nodes: Schema.Array(Node),
  edges: Schema.Array(Edge),
  triggers: Schema.Array(Trigger)
})
export type AutomationDetail = typeof AutomationDetail.Type

export const CreateAutomation = Schema.Struct({
  name: Name,
  description: Schema.optional(Schema.NullOr(text("description", 2000))),
  status: Schema.optional(AutomationStatus)
})
export type CreateAutomation = typeof CreateAutomation.Type

export const UpdateAutomation = Schema.Struct({
  name: Schema.optional(Name),
  description: Schema.optional(Schema.NullOr(text("description", 2000))),
  status: Schema.optional(AutomationStatus)
})
export type UpdateAutomation = typeof UpdateAutomation.Type

export const RunStatus = Schema.Literals(["running", "waiting", "succeeded", "failed", "cancelled"])
export type RunStatus = typeof RunStatus.Type

export const Step = Schema.Struct({
  id: Schema.Int,
  node_id: Schema.String,
  action_id: Schema.String,
  status: Schema.Literals(["succeeded", "failed", "skipped"]),
  attempt: Schema.Int,
  started_at: Schema.String,
  finished_at: Schema.String,
  duration_ms: Schema.Int,
  output: Schema.Unknown,
  error: Schema.NullOr(Schema.String)
})
export type Step = typeof Step.Type

export const Run = Schema.Struct({
  id: Schema.String,
  automation_id: Schema.String,
  version_id: Schema.String,
  status: RunStatus,
  trigger_event: Schema.String,
  trigger_payload: Schema.Unknown,
  started_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String),
  duration_ms: Schema.NullOr(Schema.Int),
  pii_redacted: Schema.Boolean,
  total_cost_usd: Schema.Number,
  total_tokens: Schema.Int,
  error: Schema.NullOr(Schema.String)
})
export type Run = typeof Run.Type

export const RunDetail = Schema.Struct({ ...Run.fields, steps: Schema.Array(Step) })
export type RunDetail = typeof RunDetail.Type

export const RunsQuery = pageQuery({ min: 1, max: 100 })

/** The flat answer of `POST /v1/automations/media/voice`. */
export const VoiceMedia = Schema.Struct({
  media_id: Schema.Int,
  type: Schema.String,
  mime_type: Schema.String,
  size: Schema.Int,
  duration: Schema.NullOr(Schema.Number),
  expires_at: Schema.NullOr(Schema.String)
})

export const Bootstrap = Schema.Struct({
  automations: Schema.Array(Automation),
  versions: Schema.Array(Schema.Unknown),
  nodes: Schema.Array(Schema.Unknown),
  edges: Schema.Array(Schema.Unknown),
  triggers: Schema.Array(Schema.Unknown),
  triggerConditions: Schema.Array(Schema.Unknown),
  triggerChannelPivots: Schema.Array(Schema.Unknown),
  configs: Schema.Unknown,
  runs: Schema.Array(Run),
  runSteps: Schema.Array(Schema.Unknown),
  templateCategories: Schema.Array(Schema.Unknown),
  templates: Schema.Array(Schema.Unknown),
  templateDefinitions: Schema.Array(Schema.Unknown),
  actionGroups: Schema.Array(Schema.Unknown),
  applicationSources: Schema.Array(Schema.Unknown),
  actionLibraryGroups: Schema.Array(Schema.Unknown)
})

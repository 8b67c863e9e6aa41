import { Schema } from "effect"
import { Condition, Joiner } from "./Domain.ts"

const Id = Schema.Int.check(Schema.isGreaterThan(0))
const Text = Schema.String.check(
  Schema.isPattern(/\S/, { message: "The text field is required." }),
  Schema.isMaxLength(4096, { message: "The text must not be greater than 4096 characters." })
)

const TextSend = Schema.Struct({ text: Text, channel_id: Schema.optional(Id) })
const VoiceSend = Schema.Struct({ voice_mode: Schema.Literal("upload"), media_id: Id, channel_id: Schema.optional(Id) })
/** `{text}` or `{voice_mode: "upload", media_id}` (a voice upload of `POST /v1/automations/media/voice`). */
export const SendData = Schema.Union([TextSend, VoiceSend])
export type SendData = typeof SendData.Type

export const TemplateData = Schema.Struct({
  template_id: Id,
  channel_id: Schema.optional(Id),
  language: Schema.optional(Schema.String.check(Schema.isMaxLength(12))),
  variables: Schema.optional(Schema.Record(Schema.String, Schema.String.check(Schema.isMaxLength(1024))))
})
export type TemplateData = typeof TemplateData.Type

export const TagData = Schema.Struct({ tag_id: Id })

export const AssignData = Schema.Struct({ user_id: Schema.optional(Id), team_id: Schema.optional(Id) })

export const ContactFields = ["firstName", "lastName", "displayName", "company", "status"] as const
export const ContactFieldData = Schema.Struct({
  field: Schema.Literals(ContactFields),
  value: Schema.NullOr(Schema.String.check(Schema.isMaxLength(255)))
})

export const Empty = Schema.Struct({})

export const CreateDealData = Schema.Struct({
  title: Schema.String.check(Schema.isPattern(/\S/), Schema.isMaxLength(255)),
  funnel_id: Schema.optional(Id),
  funnel_stage_id: Schema.optional(Id),
  amount: Schema.optional(Schema.Number.check(Schema.isGreaterThanOrEqualTo(0)))
})

export const MoveStageData = Schema.Struct({ funnel_stage_id: Id })

export const NotifyData = Schema.Struct({
  user_id: Id,
  message: Schema.String.check(Schema.isPattern(/\S/), Schema.isMaxLength(1000))
})

export const HttpData = Schema.Struct({
  url: Schema.String.check(Schema.isPattern(/^https?:\/\//i, { message: "The url must be an http(s) URL." }), Schema.isMaxLength(2048)),
  method: Schema.optional(Schema.Literals(["GET", "POST", "PUT"])),
  headers: Schema.optional(Schema.Record(Schema.String.check(Schema.isMaxLength(128)), Schema.String.check(Schema.isMaxLength(2048)))),
  body: Schema.optional(Schema.String.check(Schema.isMaxLength(16_384))),
  timeout_seconds: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 30 })))
})
export type HttpData = typeof HttpData.Type

export const ConditionData = Schema.Struct({
  conditions: Schema.Array(Condition).check(Schema.isMinLength(1), Schema.isMaxLength(50)),
  conditionsJoiner: Schema.optional(Joiner)
})
export type ConditionData = typeof ConditionData.Type

export const WaitUnits = ["seconds", "minutes", "hours", "days"] as const
export const WaitData = Schema.Union([
  Schema.Struct({
    duration: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000 })),
    unit: Schema.Literals(WaitUnits)
  }),
  Schema.Struct({ until: Schema.String.check(Schema.isPattern(/^([01]\d|2[0-3]):[0-5]\d$/, { message: "The until must be HH:MM." })) })
])
export type WaitData = typeof WaitData.Type

export interface ActionSpec<Id extends string = string, S extends Schema.Top = Schema.Top> {
  readonly id: Id
  readonly name: string
  readonly group: string
  readonly description: string
  readonly data: S
  /** Channel type the send is restricted to (the messenger send actions). */
  readonly channelType?: "msgr_a" | "msgr_b"
}

const action = <const Id extends string, S extends Schema.Top>(spec: ActionSpec<Id, S>) => spec

/** Every action a node may name in `actionId`, with the schema of its `data`. */
export const ActionCatalog = [
  action({ id: "msgr_a-send-message", name: "Send msgr_a message", group: "messaging", description: "Text or an uploaded voice note in the trigger's msgr_a conversation.", data: SendData, channelType: "msgr_a" }),
  action({ id: "msgr_b-send-message", name: "Send msgr_b message", group: "messaging", description: "Text or an uploaded voice note in the trigger's msgr_b conversation.", data: SendData, channelType: "msgr_b" }),
  action({ id: "send-message", name: "Send message", group: "messaging", description: "Text or a voice note on the trigger's thread, or on `channel_id` (any channel type).", data: SendData }),
  action({ id: "send-template", name: "Send template", group: "messaging", description: "An approved template, also outside the 24-hour window.", data: TemplateData }),
  action({ id: "add-tag", name: "Add tag", group: "contacts", description: "Adds a tag to the contact.", data: TagData }),
  action({ id: "remove-tag", name: "Remove tag", group: "contacts", description: "Removes a tag from the contact.", data: TagData }),
  action({ id: "assign-conversation", name: "Assign conversation", group: "conversations", description: "Assigns the conversation to a user or a team (exactly one).", data: AssignData }),
  action({ id: "update-contact-field", name: "Update contact field", group: "contacts", description: "Sets one contact field.", data: ContactFieldData }),
  action({ id: "opt-out-contact", name: "Opt out contact", group: "contacts", description: "Opts the contact out of broadcasts.", data: Empty }),
  action({ id: "create-deal", name: "Create deal", group: "deals", description: "A deal for the contact (default funnel and first stage unless given).", data: CreateDealData }),
  action({ id: "move-deal-stage", name: "Move deal stage", group: "deals", description: "Moves the trigger's deal (or the run's created deal) to a stage.", data: MoveStageData }),
  action({ id: "notify-user", name: "Notify user", group: "team", description: "An `automation.notification` event on the user's private channel.", data: NotifyData }),
  action({ id: "http-request", name: "HTTP request", group: "integrations", description: "A request through the SSRF guard; status and body (first 4 KB) are kept for later steps.", data: HttpData }),
  action({ id: "condition", name: "Condition", group: "flow", description: "Branches on `sourceHandle` true / false.", data: ConditionData }),
  action({ id: "wait", name: "Wait", group: "flow", description: "A duration, or until a time of day (HH:MM) in the contact's timezone.", data: WaitData })
] as const

export type CatalogEntry = (typeof ActionCatalog)[number]
export type ActionId = CatalogEntry["id"]

export const actionById: ReadonlyMap<string, CatalogEntry> = new Map(ActionCatalog.map((a) => [a.id, a]))

const groupNames: Record<string, string> = {
  messaging: "Messaging",
  contacts: "Contacts",
  conversations: "Conversations",
  deals: "Deals",
  team: "Team",
  integrations: "Integrations",
  flow: "Flow"
}

/** The catalog as the editor reads it: groups of actions, each with its `data` as JSON Schema. */
export const actionGroups = () =>
  Object.entries(groupNames).map(([id, name]) => ({
    id,
    name,
    actions: ActionCatalog.filter((a) => a.group === id).map((a) => ({
      id: a.id,
      name: a.name,
      description: a.description,
      schema: Schema.toJsonSchemaDocument(a.data).schema
    }))
  }))

import { Schema } from "effect"
import { sendTargetFields } from "../messages/Domain.ts"
import { pageQuery } from "../platform/Pagination.ts"

export const TemplateId = Schema.Int

/** Group and instance states. */
export const TemplateStatuses = ["draft", "published", "archived"] as const
export type TemplateStatus = typeof TemplateStatuses[number]

/** `local` is ours (never submitted); the others are the provider's verdicts. */
export const MetaStatuses = ["local", "pending", "approved", "rejected", "paused", "disabled"] as const
export type MetaStatus = typeof MetaStatuses[number]

export const Categories = ["utility", "marketing", "authentication"] as const
export const ButtonTypes = ["quick_reply", "url", "phone"] as const

/** The only channel type whose provider moderates templates. */
export const templateChannelType = { id: 2, key: "msgr_a_business", name: "Business messenger" } as const

export const ChannelTypeRef = Schema.Struct({ id: Schema.Int, key: Schema.String, name: Schema.String })
export const ChannelRef = Schema.Struct({ id: Schema.Int, name: Schema.String, account_name: Schema.NullOr(Schema.String) })

export const Parameter = Schema.Struct({
  id: Schema.Int,
  name: Schema.String,
  type: Schema.Literal("text"),
  sample_value: Schema.String,
  position: Schema.Int
})
export type Parameter = typeof Parameter.Type

export const Button = Schema.Struct({
  id: Schema.Int,
  type: Schema.Literals(ButtonTypes),
  label: Schema.String,
  value: Schema.NullOr(Schema.String),
  position: Schema.Int
})
export type Button = typeof Button.Type

export const Version = Schema.Struct({
  id: Schema.Int,
  language: Schema.String,
  channel_id: Schema.NullOr(Schema.Int),
  status: Schema.String,
  meta_status: Schema.String
})
export type Version = typeof Version.Type

export const LogicalTemplate = Schema.Struct({
  instances_count: Schema.Int,
  assigned_channels_count: Schema.Int,
  uses_count: Schema.Int,
  languages: Schema.Array(Schema.String),
  channels: Schema.Array(Schema.Struct({
    id: Schema.Int,
    name: Schema.String,
    account_name: Schema.NullOr(Schema.String),
    meta_status: Schema.String,
    meta_status_reason: Schema.NullOr(Schema.String),
    last_synced_at: Schema.NullOr(Schema.String)
  })),
  meta_status_counts: Schema.Record(Schema.String, Schema.Int),
  /** The common status of every instance, or `mixed`. */
  meta_overall_status: Schema.String
})

export const Template = Schema.Struct({
  id: TemplateId,
  company_id: Schema.Int,
  template_group_id: Schema.Int,
  channel_type: ChannelTypeRef,
  channel: Schema.NullOr(ChannelRef),
  name: Schema.String,
  slug: Schema.String,
  language: Schema.String,
  category: Schema.String,
  status: Schema.String,
  meta_status: Schema.String,
  meta_status_reason: Schema.NullOr(Schema.String),
  last_synced_at: Schema.NullOr(Schema.String),
  external_id: Schema.NullOr(Schema.String),
  body: Schema.String,
  parameters: Schema.Array(Parameter),
  header_enabled: Schema.Boolean,
  header_type: Schema.NullOr(Schema.String),
  header_text: Schema.NullOr(Schema.String),
  footer_enabled: Schema.Boolean,
  footer_text: Schema.NullOr(Schema.String),
  buttons_enabled: Schema.Boolean,
  buttons: Schema.Array(Button),
  labels: Schema.Array(Schema.String),
  uses_count: Schema.Int,
  logical_template: LogicalTemplate,
  /** Every instance of the group (the language versions). */
  versions: Schema.Array(Version),
  created_at: Schema.String,
  updated_at: Schema.String
})
export type Template = typeof Template.Type

export const Availability = Schema.Struct({
  channel: Schema.Struct({
    id: Schema.Int,
    name: Schema.String,
    account_name: Schema.NullOr(Schema.String),
    status: Schema.String,
    external_ids: Schema.Array(Schema.String)
  }),
  template: Schema.NullOr(Schema.Struct({
    id: Schema.Int,
    external_id: Schema.NullOr(Schema.String),
    status: Schema.String,
    meta_status: Schema.String,
    meta_status_reason: Schema.NullOr(Schema.String),
    last_synced_at: Schema.NullOr(Schema.String)
  })),
  availability: Schema.Literals(["added", "not_added"])
})
export type Availability = typeof Availability.Type

export const TemplateEvent = Schema.Struct({
  id: Schema.Int,
  type: Schema.String,
  template_id: Schema.NullOr(Schema.Int),
  language: Schema.NullOr(Schema.String),
  meta_status: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  metadata: Schema.Record(Schema.String, Schema.Unknown),
  channel: Schema.NullOr(ChannelRef),
  actor: Schema.NullOr(Schema.Struct({ id: Schema.Int, name: Schema.String })),
  created_at: Schema.String
})
export type TemplateEvent = typeof TemplateEvent.Type

/** One instance's outcome of a submit. */
export const ModerationResult = Schema.Struct({
  template_id: Schema.Int,
  channel_id: Schema.NullOr(Schema.Int),
  language: Schema.String,
  meta_status: Schema.String,
  meta_status_reason: Schema.NullOr(Schema.String),
  /** The provider's refusal of the call itself (the instance is unchanged); null when it answered. */
  error: Schema.NullOr(Schema.String)
})
export type ModerationResult = typeof ModerationResult.Type

export const Submitted = Schema.Struct({
  message: Schema.String,
  template: Template,
  results: Schema.Array(ModerationResult)
})

export const SyncStarted = Schema.Struct({
  message: Schema.String,
  /** A sync was already queued for the company: no other was, and that one is due at once. */
  already_queued: Schema.Boolean
})
export type SyncStarted = typeof SyncStarted.Type

// ---------------------------------------------------------------- requests

const text = (field: string, max: number) =>
  Schema.String.check(Schema.isMaxLength(max, { message: `The ${field} field must not be greater than ${max} characters.` }))
const required = (field: string, max: number) =>
  text(field, max).check(Schema.isPattern(/\S/, { message: `The ${field} field is required.` }))

export const Language = required("language", 12)

export const ParameterInput = Schema.Struct({
  name: required("name", 64),
  type: Schema.optional(Schema.Literal("text")),
  sample_value: Schema.optional(Schema.NullOr(text("sample_value", 255))),
  position: Schema.optional(Schema.NullOr(Schema.Int))
})
export type ParameterInput = typeof ParameterInput.Type

export const ButtonInput = Schema.Struct({
  type: Schema.Literals(ButtonTypes),
  label: required("label", 25),
  value: Schema.optional(Schema.NullOr(text("value", 2000))),
  position: Schema.optional(Schema.NullOr(Schema.Int))
})
export type ButtonInput = typeof ButtonInput.Type

/** The content of one language version (create, draft update, add language). */
const contentFields = {
  category: Schema.optional(Schema.Literals(Categories)),
  body: required("body", 1024),
  parameters: Schema.optional(Schema.Array(ParameterInput).check(Schema.isMaxLength(50))),
  header_enabled: Schema.optional(Schema.Boolean),
  header_type: Schema.optional(Schema.NullOr(Schema.Literal("text"))),
  header_text: Schema.optional(Schema.NullOr(text("header_text", 60))),
  footer_enabled: Schema.optional(Schema.Boolean),
  footer_text: Schema.optional(Schema.NullOr(text("footer_text", 60))),
  buttons_enabled: Schema.optional(Schema.Boolean),
  buttons: Schema.optional(Schema.Array(ButtonInput).check(Schema.isMaxLength(10))),
  labels: Schema.optional(Schema.Array(text("labels", 64)).check(Schema.isMaxLength(20)))
}

export const Name = required("name", 255)
export const Slug = text("slug", 100).check(
  Schema.isPattern(/^[a-z0-9_]+$/, { message: "The slug may only contain lowercase letters, digits and underscores." })
)
const ChannelIds = Schema.Array(Schema.Int).check(Schema.isMaxLength(100))

export const CreateTemplate = Schema.Struct({
  channel_type: Schema.optional(Schema.String),
  channel_ids: Schema.optional(ChannelIds),
  name: Name,
  slug: Schema.optional(Schema.NullOr(Slug)),
  language: Language,
  ...contentFields
})
export type CreateTemplate = typeof CreateTemplate.Type

export const UpdateTemplate = Schema.Struct({
  name: Schema.optional(Name),
  ...contentFields,
  body: Schema.optional(contentFields.body)
})
export type UpdateTemplate = typeof UpdateTemplate.Type

export const AddLanguage = Schema.Struct({ language: Language, ...contentFields })
export type AddLanguage = typeof AddLanguage.Type

export const AssignChannels = Schema.Struct({ channel_ids: ChannelIds })
export type AssignChannels = typeof AssignChannels.Type

export const SandboxTemplateStatus = Schema.Struct({
  template_id: Schema.Int,
  meta_status: Schema.Literals(["pending", "approved", "rejected", "paused", "disabled"]),
  reason: Schema.optional(Schema.NullOr(text("reason", 1000)))
})
export type SandboxTemplateStatus = typeof SandboxTemplateStatus.Type

export const ListQuery = {
  ...pageQuery({ min: 1, max: 100 }),
  status: Schema.optional(Schema.Literals(TemplateStatuses)),
  language: Schema.optional(text("language", 12)),
  channelType: Schema.optional(text("channelType", 64)),
  search: Schema.optional(text("search", 255)),
  sortBy: Schema.optional(Schema.Literals(["name", "created_at", "updated_at"])),
  sortDir: Schema.optional(Schema.Literals(["asc", "desc"])),
  includeFacets: Schema.optional(Schema.Literals(["true", "false", "1", "0"]))
}
export type ListParams = Schema.Struct<typeof ListQuery>["Type"]

export const Facets = Schema.Struct({
  statuses: Schema.Record(Schema.String, Schema.Int),
  languages: Schema.Record(Schema.String, Schema.Int),
  channel_types: Schema.Record(Schema.String, Schema.Int)
})

/** Variables by name; values are plain text (16 KB in all, checked by the service). */
export const Variables = Schema.Record(Schema.String, text("variables", 1024))

export const SendTemplate = Schema.Struct({
  channel_id: Schema.Int,
  template_id: TemplateId,
  language: Schema.optional(Schema.NullOr(text("language", 12))),
  variables: Schema.optional(Schema.NullOr(Variables)),
  ...sendTargetFields
})
export type SendTemplate = typeof SendTemplate.Type

import { Schema } from "effect"
import { ChannelTypes } from "../providers/Domain.ts"
import { CustomFields } from "../platform/FreeForm.ts"
import { phoneShape } from "../platform/PhoneSchemas.ts"

export const ContactId = Schema.Int
export type ContactId = typeof ContactId.Type

export const ContactStatuses = ["lead", "active", "inactive"] as const
export const ContactStatus = Schema.Literals(ContactStatuses)
export type ContactStatus = typeof ContactStatus.Type

/** The spec leaves the phone and e-mail `type` values open; these four serve both. */
export const ContactPointTypes = ["mobile", "work", "home", "other"] as const
export const ContactPointType = Schema.Literals(ContactPointTypes)

export const Phone = Schema.Struct({ phone: Schema.String, type: Schema.String })
export const Email = Schema.Struct({ email: Schema.String, type: Schema.String })
export const ContactAccount = Schema.Struct({
  id: Schema.Int,
  channel_type: Schema.String,
  external_id: Schema.String,
  username: Schema.NullOr(Schema.String),
  profile_picture: Schema.NullOr(Schema.String)
})
export type ContactAccount = typeof ContactAccount.Type
export const TagRef = Schema.Struct({ id: Schema.Int, name: Schema.String })

export const Contact = Schema.Struct({
  id: ContactId,
  company_id: Schema.Int,
  firstName: Schema.NullOr(Schema.String),
  lastName: Schema.NullOr(Schema.String),
  displayName: Schema.String,
  company: Schema.NullOr(Schema.String),
  status: ContactStatus,
  phones: Schema.Array(Phone),
  emailes: Schema.Array(Email),
  contactAccounts: Schema.Array(ContactAccount),
  tags: Schema.Array(TagRef),
  /** Scalar values by name; what segment conditions of type `custom` read. */
  custom_fields: Schema.Record(Schema.String, Schema.Unknown),
  merged_into_contact_id: Schema.NullOr(Schema.Int),
  blocked_at: Schema.NullOr(Schema.String),
  blocked_reason: Schema.NullOr(Schema.String),
  blocked_by_user_id: Schema.NullOr(Schema.Int),
  opted_out_at: Schema.NullOr(Schema.String),
  /** Signed link to `GET /v1/contacts/{id}/photo`; null when there is neither a photo nor an account picture. */
  photo_url: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "Contact" })
export type Contact = typeof Contact.Type

const text = (field: string, max: number) =>
  Schema.String.check(Schema.isMaxLength(max, { message: `The ${field} field must not be greater than ${max} characters.` }))
const required = (field: string, max: number) =>
  Schema.String.check(
    Schema.isPattern(/\S/, { message: `The ${field} field is required.` }),
    Schema.isMaxLength(max, { message: `The ${field} field must not be greater than ${max} characters.` })
  )
const list = <S extends Schema.Top>(field: string, item: S) =>
  Schema.Array(item).check(Schema.isMaxLength(50, { message: `The ${field} field must not have more than 50 items.` }))

/** Parsed by the service (`normalizePhone`): a national spelling is read in the company's `default_country`. */
export const PhoneNumber = required("phone", 64).check(phoneShape("phone"))

export const PhoneInput = Schema.Struct({
  phone: PhoneNumber,
  type: Schema.optional(ContactPointType)
})
export const EmailInput = Schema.Struct({
  email: required("email", 255).check(
    Schema.isPattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/, { message: "The email must be a valid email address." })
  ),
  type: Schema.optional(ContactPointType)
})
/** A linked messenger account; `(channel_type, external_id)` is unique in the company. */
export const AccountInput = Schema.Struct({
  channel_type: Schema.Literals(ChannelTypes),
  external_id: required("external_id", 255),
  username: Schema.optional(Schema.NullOr(text("username", 255))),
  profile_picture: Schema.optional(Schema.NullOr(text("profile_picture", 2048)))
})
export type AccountInput = typeof AccountInput.Type

const contactFields = {
  firstName: Schema.optional(Schema.NullOr(text("firstName", 255))),
  lastName: Schema.optional(Schema.NullOr(text("lastName", 255))),
  displayName: Schema.optional(Schema.NullOr(text("displayName", 255))),
  company: Schema.optional(Schema.NullOr(text("company", 255))),
  status: Schema.optional(ContactStatus),
  phones: Schema.optional(list("phones", PhoneInput)),
  emailes: Schema.optional(list("emailes", EmailInput)),
  contactAccounts: Schema.optional(list("contactAccounts", AccountInput)),
  /** An uploaded image (`POST /v1/uploads`) as the contact's photo; null removes it. */
  photo_media_id: Schema.optional(Schema.NullOr(Schema.Int)),
  /** On PATCH merged into the stored ones: a key with null is removed, `custom_fields: null` removes them all. */
  custom_fields: Schema.optional(Schema.NullOr(CustomFields))
}

/** Status `lead` by default; it needs something to recognise the person by (checked by the service). */
export const CreateContact = Schema.Struct(contactFields)
export type CreateContact = typeof CreateContact.Type

/** Absent keys stay; `phones`, `emailes` and `contactAccounts`, when present, replace the whole list. */
export const UpdateContact = Schema.Struct(contactFields)
export type UpdateContact = typeof UpdateContact.Type

export const SortBy = Schema.Literals(["id", "display_name", "company", "status", "created_at"])
export const SortDir = Schema.Literals(["asc", "desc"])
const Flag = Schema.Literals(["0", "1", "true", "false"])
const FilterStatus = Schema.Literals(["active", "inactive"]).annotate({
  message: "The selected status is invalid: only active and inactive can be filtered."
})

export const ListQuery = {
  page: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  perPage: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 5, maximum: 100 }))),
  search: Schema.optional(text("search", 255)),
  "statuses[]": Schema.optional(Schema.Array(FilterStatus)),
  statuses: Schema.optional(Schema.Array(FilterStatus)),
  sortBy: Schema.optional(SortBy),
  sortDir: Schema.optional(SortDir),
  exclude_lid_only: Schema.optional(Flag)
}
export type ListParams = Schema.Struct<typeof ListQuery>["Type"]

export const LookupQuery = {
  q: required("q", 255)
}

export const ChannelOption = Schema.Struct({
  channel_type: Schema.String,
  label: Schema.String,
  /** Live channels of this type in the company; linking works without one, sending needs one. */
  channels_count: Schema.Int
})

/**
 * One identifier of a batch. Only the shape is checked here; a value that cannot match (a phone that does not
 * parse, nothing to match by) is answered on its own item with a `reason`, not by refusing the batch.
 */
export const Identifier = Schema.Struct({
  phone: Schema.optional(Schema.NullOr(Schema.String)),
  username: Schema.optional(Schema.NullOr(Schema.String)),
  external_id: Schema.optional(Schema.NullOr(Schema.String)),
  channel_type: Schema.optional(Schema.NullOr(Schema.Literals(ChannelTypes)))
})
export type Identifier = typeof Identifier.Type

export const ResolveIdentifiers = Schema.Struct({
  identifiers: Schema.Array(Identifier).check(
    Schema.isMinLength(1, { message: "The identifiers field must have at least 1 item." }),
    Schema.isMaxLength(500, { message: "The identifiers field must not have more than 500 items." })
  )
})
export type ResolveIdentifiers = typeof ResolveIdentifiers.Type

/** Why an identifier has no contact: none matched, the phone does not parse, or it carries nothing to match by. */
export const UnresolvedReasons = ["not_found", "invalid_phone", "no_identifier"] as const
export type UnresolvedReason = typeof UnresolvedReasons[number]

export const ResolvedIdentifier = Schema.Struct({
  identifier: Identifier,
  contact_id: Schema.NullOr(Schema.Int),
  /** null when a contact was found. */
  reason: Schema.NullOr(Schema.Literals(UnresolvedReasons)),
  /** What to fix, for `invalid_phone` and `no_identifier`; null otherwise. */
  message: Schema.NullOr(Schema.String)
})
export type ResolvedIdentifier = typeof ResolvedIdentifier.Type

export const MergeContact = Schema.Struct({
  target_contact_id: Schema.Int,
  dry_run: Schema.optional(Schema.Boolean)
})
export type MergeContact = typeof MergeContact.Type

export const MergeCounts = Schema.Struct({
  conversations: Schema.Int,
  threads: Schema.Int,
  messages: Schema.Int,
  contactAccounts: Schema.Int,
  tags: Schema.Int,
  phones: Schema.Int,
  emailes: Schema.Int
})
export type MergeCounts = typeof MergeCounts.Type

export const MergeResult = Schema.Struct({
  message: Schema.String,
  dry_run: Schema.Boolean,
  source_contact_id: Schema.Int,
  target_contact_id: Schema.Int,
  /** What moved to the target (with `dry_run`: what would move). */
  moved: MergeCounts,
  contact: Contact
})

export const ReplaceTags = Schema.Struct({
  tag_ids: Schema.Array(Schema.Int).check(
    Schema.isMaxLength(200, { message: "The tag ids field must not have more than 200 items." })
  )
})
export type ReplaceTags = typeof ReplaceTags.Type

export const BlockContact = Schema.Struct({
  reason: Schema.optional(Schema.NullOr(text("reason", 500)))
})
export type BlockContact = typeof BlockContact.Type

export const ProviderFailure = Schema.Struct({
  channel_id: Schema.Int,
  error_code: Schema.String,
  message: Schema.String
})
export type ProviderFailure = typeof ProviderFailure.Type

export const BlockResult = Schema.Struct({
  message: Schema.String,
  contact_id: Schema.Int,
  blocked_at: Schema.NullOr(Schema.String),
  blocked_reason: Schema.NullOr(Schema.String),
  provider_failures: Schema.Array(ProviderFailure)
})
export type BlockResult = typeof BlockResult.Type

export const BlockPreviewChannel = Schema.Struct({
  channel_id: Schema.Int,
  channel_name: Schema.String,
  channel_type: Schema.String,
  provider_block_supported: Schema.Boolean,
  window_open: Schema.Boolean
})
export type BlockPreviewChannel = typeof BlockPreviewChannel.Type

export const BlockPreview = Schema.Struct({
  contact_id: Schema.Int,
  blocked: Schema.Boolean,
  channels: Schema.Array(BlockPreviewChannel)
})

export const PermissionStatuses = ["none", "pending", "granted", "rejected", "not_required", "unavailable"] as const

export const Eligibility = Schema.Struct({
  message: Schema.Struct({
    window_open: Schema.Boolean,
    window_expires_at: Schema.NullOr(Schema.Int),
    requires_template: Schema.Boolean
  }),
  call: Schema.Struct({
    channel_kind: Schema.String,
    can_call: Schema.Boolean,
    permission_status: Schema.Literals(PermissionStatuses),
    permission_expires_at: Schema.NullOr(Schema.Int),
    can_request_permission: Schema.Boolean,
    request_cooldown_until: Schema.NullOr(Schema.Int),
    attempts_remaining: Schema.Int,
    has_msgr_a_account: Schema.Boolean
  })
})
export type Eligibility = typeof Eligibility.Type

/** `sip` (or no channel_id): the company's SIP trunk; an integer: one of its messenger channels. */
export const EligibilityChannel = Schema.Union([Schema.Int, Schema.Literal("sip")])

export const EligibilityQuery = {
  channel_id: Schema.optional(EligibilityChannel)
}

export const CallPermissionRequest = Schema.Struct({
  channel_id: Schema.Int
})
export type CallPermissionRequest = typeof CallPermissionRequest.Type

/** The spec's 429 of the call-permission request: the eligibility rides along, with `request_cooldown_until` set. */
export class CallPermissionLimit extends Schema.Error<CallPermissionLimit>("CallPermissionLimit")({
  data: Schema.Struct({ message: Schema.String, eligibility: Eligibility })
}, { httpApiStatus: 429 }) {}

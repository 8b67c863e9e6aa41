import { Schema } from "effect"
import { pageQuery } from "../platform/Pagination.ts"

/** Segment ids travel as strings (the spec); they are bigint row ids underneath. */
export const SegmentId = Schema.String
export type SegmentId = typeof SegmentId.Type

export const SegmentTypes = ["dynamic", "static"] as const
export const SegmentType = Schema.Literals(SegmentTypes)
export type SegmentType = typeof SegmentType.Type

export const GroupLogic = Schema.Literals(["and", "or"])
export type GroupLogic = typeof GroupLogic.Type

/**
 * A condition as the client sends it. Only the outline is checked here; which `operator`,
 * `field_name` and `value` fit which `type` is the compiler's (`Compiler.parse`), so each
 * mistake is reported on `conditions.<i>.<key>`.
 */
export const ConditionInput = Schema.Struct({
  group: Schema.optional(Schema.NullOr(Schema.Int)),
  type: Schema.String,
  operator: Schema.String,
  value: Schema.optional(Schema.Unknown),
  field_name: Schema.optional(Schema.NullOr(Schema.String))
})
export type ConditionInput = typeof ConditionInput.Type

/** A condition as stored and shown: normalized by the compiler. */
export const Condition = Schema.Struct({
  group: Schema.Int,
  type: Schema.String,
  operator: Schema.String,
  value: Schema.Unknown,
  field_name: Schema.NullOr(Schema.String)
})
export type Condition = typeof Condition.Type

export const Segment = Schema.Struct({
  id: SegmentId,
  company_id: Schema.Int,
  name: Schema.String,
  slug: Schema.String,
  description: Schema.String,
  type: SegmentType,
  conditions: Schema.Array(Condition),
  group_logic: GroupLogic,
  conditions_summary: Schema.String,
  estimated_count: Schema.Int,
  /** Static segments: live members; null for dynamic ones. */
  contacts_count: Schema.NullOr(Schema.Int),
  /** Static segments: the live members' contact ids, ascending; null for dynamic ones. */
  members: Schema.NullOr(Schema.Array(Schema.Int)),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "Segment" })
export type Segment = typeof Segment.Type

export const MaxConditions = 50
export const MaxMembersPerCall = 10_000

const Name = Schema.String.check(
  Schema.isPattern(/\S/, { message: "The name field is required." }),
  Schema.isMaxLength(255, { message: "The name field must not be greater than 255 characters." })
)
const Description = Schema.String.check(
  Schema.isMaxLength(1000, { message: "The description field must not be greater than 1000 characters." })
)
const Conditions = Schema.Array(ConditionInput).check(
  Schema.isMaxLength(MaxConditions, { message: `The conditions field must not have more than ${MaxConditions} items.` })
)
const ContactIds = Schema.Array(Schema.Int).check(
  Schema.isMaxLength(MaxMembersPerCall, { message: `The contact_ids field must not have more than ${MaxMembersPerCall} items.` })
)

export const CreateSegment = Schema.Struct({
  name: Name,
  description: Schema.optional(Schema.NullOr(Description)),
  type: Schema.optional(SegmentType),
  conditions: Schema.optional(Conditions),
  group_logic: Schema.optional(GroupLogic),
  /** Static segments only: the first members. */
  contact_ids: Schema.optional(ContactIds)
})
export type CreateSegment = typeof CreateSegment.Type

/** Absent keys stay; `conditions` replaces the whole list. The type is fixed at creation. */
export const UpdateSegment = Schema.Struct({
  name: Schema.optional(Name),
  description: Schema.optional(Schema.NullOr(Description)),
  type: Schema.optional(SegmentType),
  conditions: Schema.optional(Conditions),
  group_logic: Schema.optional(GroupLogic)
})
export type UpdateSegment = typeof UpdateSegment.Type

export const EstimateInput = Schema.Struct({
  conditions: Conditions,
  group_logic: Schema.optional(GroupLogic)
})
export type EstimateInput = typeof EstimateInput.Type

export const MembersInput = Schema.Struct({ contact_ids: ContactIds })
export type MembersInput = typeof MembersInput.Type

export const ListQuery = {
  ...pageQuery({ min: 1, max: 100 }),
  search: Schema.optional(Schema.String.check(
    Schema.isMaxLength(255, { message: "The search field must not be greater than 255 characters." })
  ))
}
export type ListParams = Schema.Struct<typeof ListQuery>["Type"]

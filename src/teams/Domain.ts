import { Schema } from "effect"

export const TeamId = Schema.Int
export type TeamId = typeof TeamId.Type

/**
 * `custom` (the spec's only value): the team sees exactly its `channel_ids`.
 * `all`: the team sees every channel of the company (ChannelAccess treats any
 * mode other than `custom` that way).
 */
export const ChannelAccessModes = ["custom", "all"] as const
export const ChannelAccessMode = Schema.Literals(ChannelAccessModes)
export type ChannelAccessMode = typeof ChannelAccessMode.Type

export const Team = Schema.Struct({
  id: TeamId,
  company_id: Schema.Int,
  name: Schema.String,
  description: Schema.String,
  channel_access: Schema.Struct({ mode: Schema.String, channel_ids: Schema.Array(Schema.Int) }),
  member_ids: Schema.Array(Schema.Int),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "Team" })
export type Team = typeof Team.Type

const Name = Schema.String.check(
  Schema.isPattern(/\S/, { message: "The name field is required." }),
  Schema.isMaxLength(255, { message: "The name field must not be greater than 255 characters." })
)
const Description = Schema.String.check(
  Schema.isMaxLength(1000, { message: "The description field must not be greater than 1000 characters." })
)
const Ids = (field: string) =>
  Schema.Array(Schema.Int).check(
    Schema.isMaxLength(1000, { message: `The ${field} field must not have more than 1000 items.` })
  )

export const CreateTeam = Schema.Struct({
  name: Name,
  description: Schema.optional(Schema.NullOr(Description)),
  channel_access_mode: Schema.optional(ChannelAccessMode),
  channel_ids: Schema.optional(Ids("channel ids")),
  member_ids: Schema.optional(Ids("member ids"))
})
export type CreateTeam = typeof CreateTeam.Type

/** Absent keys stay as they are; `channel_ids` and `member_ids` replace the whole list when given. */
export const UpdateTeam = Schema.Struct({
  name: Schema.optional(Name),
  description: Schema.optional(Schema.NullOr(Description)),
  channel_access_mode: Schema.optional(ChannelAccessMode),
  channel_ids: Schema.optional(Ids("channel ids")),
  member_ids: Schema.optional(Ids("member ids"))
})
export type UpdateTeam = typeof UpdateTeam.Type

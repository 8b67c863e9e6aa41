import { Schema } from "effect"
import { Roles } from "../auth/Permissions.ts"

export const MemberId = Schema.Int
export type MemberId = typeof MemberId.Type

export const Role = Schema.Literals(Roles)

/** A person's membership in the active company; `id` is the user id. */
export const Member = Schema.Struct({
  id: MemberId,
  name: Schema.String,
  lastname: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  role: Schema.String,
  availability: Schema.String,
  telephony: Schema.Struct({ enabled: Schema.Boolean, extension: Schema.NullOr(Schema.String) }),
  /** Signed link to `GET /v1/users/{id}/photo` for the active company; null without a photo. */
  photo_url: Schema.NullOr(Schema.String)
}).annotate({ identifier: "Member" })
export type Member = typeof Member.Type

export const User = Schema.Struct({
  id: Schema.Int,
  name: Schema.String,
  lastname: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  role: Schema.String,
  /** Signed link to `GET /v1/users/{id}/photo` for the active company; null without a photo. */
  photo_url: Schema.NullOr(Schema.String)
}).annotate({ identifier: "MemberUser" })
export type User = typeof User.Type

export const ChangeRole = Schema.Struct({ role: Role })
export type ChangeRole = typeof ChangeRole.Type

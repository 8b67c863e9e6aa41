import { Schema } from "effect"

export const Profile = Schema.Struct({
  id: Schema.Int,
  name: Schema.String,
  lastname: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  email_verified: Schema.Boolean,
  phone: Schema.NullOr(Schema.String),
  phone_verified: Schema.Boolean,
  timezone: Schema.String,
  locale: Schema.String,
  availability: Schema.String,
  is_service_account: Schema.Boolean,
  current_company_id: Schema.NullOr(Schema.Int),
  roles: Schema.Array(Schema.String),
  permissions: Schema.Array(Schema.String)
})
export type Profile = typeof Profile.Type

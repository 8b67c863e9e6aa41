import { Schema } from "effect"

export const ApiTokenId = Schema.Int
export type ApiTokenId = typeof ApiTokenId.Type

// Further fields of the record are "not shown" by the spec; these are the ones an
// integrator can act on. The secret hash and the owning service account stay inside.
export const ApiToken = Schema.Struct({
  id: ApiTokenId,
  name: Schema.String,
  description: Schema.String,
  abilities: Schema.Array(Schema.String),
  last_used_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "ApiToken" })
export type ApiToken = typeof ApiToken.Type

/** The create answer: the only place the plaintext bearer value ever appears. */
export const CreatedApiToken = Schema.Struct({ ...ApiToken.fields, token: Schema.String })
export type CreatedApiToken = typeof CreatedApiToken.Type

const Name = Schema.String.check(
  Schema.isPattern(/\S/, { message: "The name field is required." }),
  Schema.isMaxLength(255, { message: "The name field must not be greater than 255 characters." })
)
const Description = Schema.String.check(
  Schema.isMaxLength(1000, { message: "The description field must not be greater than 1000 characters." })
)

export const CreateApiToken = Schema.Struct({
  name: Name,
  description: Schema.optional(Description)
})
export type CreateApiToken = typeof CreateApiToken.Type

export const UpdateApiToken = Schema.Struct({
  name: Schema.optional(Name),
  description: Schema.optional(Description)
})
export type UpdateApiToken = typeof UpdateApiToken.Type

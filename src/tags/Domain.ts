import { Schema } from "effect"

export const TagId = Schema.Int
export type TagId = typeof TagId.Type

export const Tag = Schema.Struct({
  id: TagId,
  company_id: Schema.Int,
  name: Schema.String,
  /** Live contacts carrying the tag. */
  contacts_count: Schema.Int,
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "Tag" })
export type Tag = typeof Tag.Type

const Name = Schema.String.check(
  Schema.isPattern(/\S/, { message: "The name field is required." }),
  Schema.isMaxLength(100, { message: "The name field must not be greater than 100 characters." })
)

/** Names are unique per company, ignoring case. */
export const TagInput = Schema.Struct({ name: Name })
export type TagInput = typeof TagInput.Type

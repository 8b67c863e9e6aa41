import { Schema } from "effect"

const utf8 = new TextEncoder()

export const maxFreeFormBytes = 16 * 1024

/**
 * A free-form object a client may send (custom fields, metadata, settings without a schema of their own):
 * any JSON object of at most 16 KB as JSON; depth and key names are checked with every body (InputHygiene).
 */
export const FreeForm = (field: string) =>
  Schema.Record(Schema.String, Schema.Unknown).check(
    Schema.makeFilter((value: Record<string, unknown>) =>
      utf8.encode(JSON.stringify(value)).length <= maxFreeFormBytes || `The ${field.replace(/_/g, " ")} field must be at most 16 KB as JSON.`
    )
  )

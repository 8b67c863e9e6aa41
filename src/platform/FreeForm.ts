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

/** A custom field name: what a segment condition of type `custom` can name (`custom_fields.<key>`). */
export const customFieldKey = /^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}$/
export const maxCustomFields = 50
export const maxCustomFieldText = 255

const CustomValue = Schema.Union([Schema.String, Schema.Finite, Schema.Boolean, Schema.Null]).annotate({
  message: "A custom field must be a string, a number, a boolean or null."
})

/**
 * Custom fields: an object of scalar values (text up to 255 characters, number, boolean; null removes the key
 * on a merge), at most 50 keys named like a segment's custom condition. Each refusal names its key.
 */
export const CustomFields = Schema.Record(Schema.String, CustomValue).check(
  Schema.makeFilter((fields: Record<string, string | number | boolean | null>) => {
    const keys = Object.keys(fields)
    if (keys.length > maxCustomFields) return `The custom fields field must not have more than ${maxCustomFields} keys.`
    const issues: Array<{ readonly path: ReadonlyArray<PropertyKey>; readonly issue: string }> = []
    for (const key of keys) {
      const value = fields[key]
      if (!customFieldKey.test(key)) {
        issues.push({ path: [key], issue: "A custom field name is 1 to 64 letters, digits, _ . or -, not starting with . or -." })
      } else if (typeof value === "string" && value.length > maxCustomFieldText) {
        issues.push({ path: [key], issue: `The custom field ${key} must not be greater than ${maxCustomFieldText} characters.` })
      }
    }
    return issues.length === 0 ? true : issues
  })
)
export type CustomFields = typeof CustomFields.Type

/**
 * JSON Schema (as OpenAPI 3.1 documents hold it) to a TypeScript type expression. Only the keywords that
 * shape a value are read; bounds and patterns stay the server's to check.
 */

/** The parts of an OpenAPI 3.1 / JSON Schema document that the client generator and the fuzzer read. */
export interface JsonSchema {
  readonly $ref?: string
  readonly type?: string | ReadonlyArray<string>
  readonly enum?: ReadonlyArray<unknown>
  readonly const?: unknown
  readonly anyOf?: ReadonlyArray<JsonSchema>
  readonly oneOf?: ReadonlyArray<JsonSchema>
  readonly allOf?: ReadonlyArray<JsonSchema>
  readonly not?: JsonSchema
  readonly properties?: Readonly<Record<string, JsonSchema>>
  readonly required?: ReadonlyArray<string>
  readonly additionalProperties?: boolean | JsonSchema
  readonly items?: JsonSchema
  readonly minItems?: number
  readonly maxItems?: number
  readonly minLength?: number
  readonly maxLength?: number
  readonly minimum?: number
  readonly maximum?: number
  readonly exclusiveMinimum?: number
  readonly exclusiveMaximum?: number
  readonly format?: string
  readonly pattern?: string
  readonly description?: string
}

/** The pattern the contract gives an integer written as a string (path ids, page numbers). */
export const NUMERIC_STRING = "^[+-]?(?:\\d+(?:\\.\\d+)?|\\.\\d+)(?:[Ee][+-]?\\d+)?$"

export const refName = (ref: string) => ref.slice(ref.lastIndexOf("/") + 1)

export const propertyKey = (key: string) => /^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key)

const union = (members: ReadonlyArray<string>) => {
  const distinct = [...new Set(members)]
  if (distinct.length === 0) return "never"
  return distinct.length === 1 ? distinct[0] : distinct.map((m) => m.includes("=>") ? `(${m})` : m).join(" | ")
}

const objectType = (schema: JsonSchema, depth: number): string => {
  const required = new Set(schema.required ?? [])
  const lines = Object.entries(schema.properties ?? {}).map(([key, value]) => {
    const doc = value.description === undefined ? "" : `/** ${value.description.replace(/\*\//g, "*\\/")} */\n${"  ".repeat(depth + 1)}`
    return `${doc}${propertyKey(key)}${required.has(key) ? "" : "?"}: ${typeExpression(value, depth + 1)}`
  })
  const extra = schema.additionalProperties
  if (typeof extra === "object") lines.push(`[key: string]: ${typeExpression(extra, depth + 1)}`)
  else if (extra !== false && lines.length === 0) lines.push("[key: string]: unknown")
  if (lines.length === 0) return "{}"
  const pad = "  ".repeat(depth + 1)
  return `{\n${pad}${lines.join(`\n${pad}`)}\n${"  ".repeat(depth)}}`
}

const primitive = (type: string, schema: JsonSchema, depth: number, numericStrings: boolean): string => {
  switch (type) {
    case "null":
      return "null"
    case "boolean":
      return "boolean"
    case "integer":
    case "number":
      return "number"
    case "string":
      if (schema.format === "binary") return "Blob"
      return numericStrings && schema.pattern === NUMERIC_STRING ? "number | string" : "string"
    case "array":
      return arrayType(schema, depth, numericStrings)
    case "object":
      return objectType(schema, depth)
    default:
      return "unknown"
  }
}

const arrayType = (schema: JsonSchema, depth: number, numericStrings: boolean) => {
  const item = schema.items === undefined ? "unknown" : typeExpression(schema.items, depth, numericStrings)
  return `Array<${item}>`
}

/**
 * The TypeScript type of a schema. `numericStrings` widens the contract's numeric strings to
 * `number | string`, for values the client writes into a URL.
 */
export const typeExpression = (schema: JsonSchema, depth = 0, numericStrings = false): string => {
  if (schema.$ref !== undefined) return refName(schema.$ref)
  if (schema.enum !== undefined) return union(schema.enum.map((v) => JSON.stringify(v)))
  if (schema.const !== undefined) return JSON.stringify(schema.const)
  if (schema.not !== undefined && Object.keys(schema.not).length === 0) return "never"
  const alternatives = schema.anyOf ?? schema.oneOf
  if (alternatives !== undefined) return union(alternatives.map((s) => typeExpression(s, depth, numericStrings)))
  if (schema.allOf !== undefined) return schema.allOf.map((s) => typeExpression(s, depth, numericStrings)).join(" & ")
  if (Array.isArray(schema.type)) return union(schema.type.map((t: string) => primitive(t, schema, depth, numericStrings)))
  if (typeof schema.type === "string") return primitive(schema.type, schema, depth, numericStrings)
  if (schema.properties !== undefined) return objectType(schema, depth)
  return "unknown"
}

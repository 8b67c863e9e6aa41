import fc from "fast-check"
import type { JsonSchema } from "../../scripts/client/Schema.ts"

export type { JsonSchema }

export type Resolve = (schema: JsonSchema) => JsonSchema

/** `$ref`s into `#/components/schemas`, followed until a schema that is not a reference. */
export const resolver = (components: Record<string, JsonSchema>): Resolve => {
  const resolve = (schema: JsonSchema): JsonSchema => {
    if (schema.$ref === undefined) return schema
    const name = decodeURIComponent(schema.$ref.replace(/^#\/components\/schemas\//, ""))
    return resolve(components[name] ?? {})
  }
  return resolve
}

const formatted = (format: string | undefined): fc.Arbitrary<string> | undefined => {
  switch (format) {
    case "email":
      return fc.emailAddress()
    case "uri":
    case "url":
      return fc.webUrl()
    case "uuid":
      return fc.uuid()
    case "date-time":
      return fc.date({ min: new Date("2000-01-01"), max: new Date("2100-01-01"), noInvalidDate: true }).map((d) => d.toISOString())
    case "date":
      return fc.date({ min: new Date("2000-01-01"), max: new Date("2100-01-01"), noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10))
    default:
      return undefined
  }
}

/** A value the schema accepts, as far as JSON Schema says (patterns and cross-field rules are not followed). */
export const valid = (schema: JsonSchema, resolve: Resolve, depth = 0): fc.Arbitrary<unknown> => {
  const s = resolve(schema)
  if (depth > 6) return fc.constant(null)
  if (s.const !== undefined) return fc.constant(s.const)
  if (s.enum !== undefined && s.enum.length > 0) return fc.constantFrom(...s.enum)
  const union = s.anyOf ?? s.oneOf
  if (union !== undefined && union.length > 0) return fc.oneof(...union.map((u) => valid(u, resolve, depth + 1)))
  if (s.allOf !== undefined && s.allOf.length > 0) return valid(s.allOf[0], resolve, depth + 1)
  const type = Array.isArray(s.type) ? s.type[0] : s.type
  switch (type) {
    case "null":
      return fc.constant(null)
    case "boolean":
      return fc.boolean()
    case "integer": {
      const min = s.minimum ?? (s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + 1 : 1)
      const max = s.maximum ?? (s.exclusiveMaximum !== undefined ? s.exclusiveMaximum - 1 : Math.max(min, 1_000))
      return fc.integer({ min: Math.ceil(min), max: Math.max(Math.ceil(min), Math.floor(max)) })
    }
    case "number": {
      const min = s.minimum ?? s.exclusiveMinimum ?? 0
      const max = s.maximum ?? s.exclusiveMaximum ?? 1_000
      return fc.double({ min, max, noNaN: true, noDefaultInfinity: true })
    }
    case "string":
      return formatted(s.format) ?? fc.string({ minLength: s.minLength ?? 1, maxLength: Math.min(s.maxLength ?? 24, 24) })
    case "array":
      return fc.array(valid(s.items ?? {}, resolve, depth + 1), { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 3, 3) })
    case "object":
    case undefined: {
      if (s.properties === undefined) return type === "object" ? fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }) : fc.jsonValue({ maxDepth: 2 })
      const required = new Set(s.required ?? [])
      const record: Record<string, fc.Arbitrary<unknown>> = {}
      for (const [key, value] of Object.entries(s.properties)) record[key] = valid(value, resolve, depth + 1)
      return fc.record(record, { requiredKeys: [...required].filter((k) => k in record) })
    }
    default:
      return fc.jsonValue({ maxDepth: 2 })
  }
}

/** Hostile replacements for one value: wrong types, controls, sizes, signs and Unicode edge cases. */
export const hostile: fc.Arbitrary<unknown> = fc.constantFrom<unknown>(
  "a\u0000b",
  "\u0000",
  "\u001b[31m",
  "",
  " ",
  "x".repeat(70_000),
  "\ud800",
  "\udfff\ud800",
  "\u202e\u2066evil",
  "\ufeff",
  "👩‍👩‍👧‍👦".repeat(50),
  "𝟘𝟙𝟚",
  "null",
  "../../etc/passwd",
  "' OR 1=1--",
  "%00",
  -1,
  0,
  -9_007_199_254_740_991,
  9_007_199_254_740_993,
  1e308,
  -0.5,
  3.14,
  true,
  null,
  [],
  [null],
  {},
  JSON.parse("{\"__proto__\":{\"polluted\":1}}"),
  { constructor: { prototype: { polluted: 1 } } },
  Array.from({ length: 2_000 }, (_, i) => i)
)

/** Every path to a value inside `value` (object keys and array indices), the root excluded. */
export const pathsOf = (value: unknown, prefix: ReadonlyArray<string | number> = []): Array<ReadonlyArray<string | number>> => {
  if (value === null || typeof value !== "object") return []
  const entries: Array<[string | number, unknown]> = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value)
  return entries.flatMap(([key, child]) => [[...prefix, key], ...pathsOf(child, [...prefix, key])])
}

const clone = (value: unknown): any => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)))

/** `value` with the thing at `path` replaced (`undefined` deletes it). */
export const replaceAt = (value: unknown, path: ReadonlyArray<string | number>, replacement: unknown): unknown => {
  const copy = clone(value)
  let node = copy
  for (const key of path.slice(0, -1)) node = node[key]
  const last = path[path.length - 1]
  if (replacement === undefined) {
    if (Array.isArray(node)) node.splice(Number(last), 1)
    else delete node[last]
  } else {
    Object.defineProperty(node, last, { value: replacement, enumerable: true, writable: true, configurable: true })
  }
  return copy
}

/** One request body of the class pass; `refuse` when any answer but a 4xx is a fault (the input is out of contract). */
export interface ClassCase {
  readonly label: string
  readonly body: string
  readonly refuse: boolean
}

const idKey = /(^|_)id$|[a-z]Id$/
const idsKey = /(^|_)ids$|[a-z]Ids$/
const prototypeKeys = ["toString", "valueOf", "constructor", "__proto__", "hasOwnProperty", "isPrototypeOf"]

/** At most `n` of `items`, spread over the list (first, last and between). */
const spread = <A>(items: ReadonlyArray<A>, n: number): Array<A> =>
  items.length <= n ? [...items] : Array.from({ length: n }, (_, i) => items[Math.round((i * (items.length - 1)) / Math.max(n - 1, 1))])

const leafAt = (value: unknown, path: ReadonlyArray<string | number>): unknown => path.reduce<any>((node, key) => node?.[key], value)

/** `value` with the thing at `path` replaced by the raw JSON text `raw` (numbers JSON.stringify cannot write). */
const replaceRaw = (value: unknown, path: ReadonlyArray<string | number>, raw: string) => {
  const marker = "\u0001raw\u0001"
  return JSON.stringify(replaceAt(value, path, marker)).replace(JSON.stringify(marker), raw)
}

const isIdPath = (path: ReadonlyArray<string | number>) => {
  const last = path[path.length - 1]
  const parent = path[path.length - 2]
  return (typeof last === "string" && idKey.test(last)) || (typeof last === "number" && typeof parent === "string" && idsKey.test(parent))
}

/**
 * The input classes, each applied to the fields of one valid body where it fits: lone surrogates and strings
 * past every limit in each kind of string, non-positive and inexact ids, huge and infinite numbers, lists of
 * the wrong item type and nested past the depth limit, keys named like `Object.prototype` members at every
 * object, and duplicate keys. Drawn from the sample itself, so a new route is covered as it is.
 */
export const classCases = (sample: unknown, perClass = 4): Array<ClassCase> => {
  if (sample === null || typeof sample !== "object" || Array.isArray(sample)) return []
  const paths = pathsOf(sample)
  const leaves = paths.filter((p) => { const v = leafAt(sample, p); return v === null || typeof v !== "object" })
  const strings = leaves.filter((p) => typeof leafAt(sample, p) === "string")
  const ids = leaves.filter((p) => typeof leafAt(sample, p) === "number" && isIdPath(p))
  const numbers = leaves.filter((p) => typeof leafAt(sample, p) === "number" && !isIdPath(p))
  const arrays = paths.filter((p) => Array.isArray(leafAt(sample, p)))
  const objects: Array<ReadonlyArray<string | number>> = [[], ...paths.filter((p) => { const v = leafAt(sample, p); return v !== null && typeof v === "object" && !Array.isArray(v) })]
  const cases: Array<ClassCase> = []
  const at = (p: ReadonlyArray<string | number>) => p.join(".") || "body"
  for (const p of spread(strings, perClass)) {
    cases.push({ label: `lone surrogate at ${at(p)}`, body: JSON.stringify(replaceAt(sample, p, "a\ud800b")), refuse: true })
    cases.push({ label: `20,000 characters at ${at(p)}`, body: JSON.stringify(replaceAt(sample, p, "x".repeat(20_000))), refuse: true })
  }
  for (const p of spread(ids, perClass)) {
    cases.push({ label: `id -1 at ${at(p)}`, body: JSON.stringify(replaceAt(sample, p, -1)), refuse: true })
    cases.push({ label: `id 2^53 at ${at(p)}`, body: replaceRaw(sample, p, "9007199254740993"), refuse: true })
    cases.push({ label: `id 1.5 at ${at(p)}`, body: JSON.stringify(replaceAt(sample, p, 1.5)), refuse: true })
  }
  for (const p of spread(numbers, perClass)) {
    cases.push({ label: `1e400 at ${at(p)}`, body: replaceRaw(sample, p, "1e400"), refuse: false })
    cases.push({ label: `2^63 at ${at(p)}`, body: replaceRaw(sample, p, "9223372036854775808"), refuse: false })
    cases.push({ label: `-2^31-1 at ${at(p)}`, body: JSON.stringify(replaceAt(sample, p, -2_147_483_649)), refuse: false })
  }
  for (const p of spread(arrays, perClass)) {
    cases.push({ label: `items of the wrong type at ${at(p)}`, body: JSON.stringify(replaceAt(sample, p, [{}, "x", [[1]], null, true, 1])), refuse: false })
    cases.push({ label: `10,000 items at ${at(p)}`, body: JSON.stringify(replaceAt(sample, p, Array.from({ length: 10_000 }, (_, i) => i + 1))), refuse: false })
  }
  const deepest = leaves[0] ?? []
  cases.push({ label: `40 nested lists at ${at(deepest)}`, body: replaceRaw(sample, deepest.length > 0 ? deepest : ["zz_deep"], "[".repeat(40) + "]".repeat(40)), refuse: true })
  for (const p of spread(objects, perClass)) {
    const keys = prototypeKeys.map((key) => `${JSON.stringify(key)}:"x"`).join(",")
    const text = JSON.stringify(sample)
    const node = JSON.stringify(leafAt(sample, p))
    const withKeys = node === "{}" ? `{${keys}}` : `{${keys},${node.slice(1)}`
    const body = p.length === 0 ? withKeys : replaceRaw(sample, p, withKeys)
    cases.push({ label: `prototype-member keys at ${at(p)}`, body, refuse: false })
    cases.push({ label: `prototype-member keys with objects at ${at(p)}`, body: body.replace(/"x"(?=[,}])/g, "{\"a\":1}"), refuse: false })
    if (p.length === 0 && text !== "{}") {
      const first = Object.keys(sample)[0]
      cases.push({ label: `duplicate key ${first}, hostile last`, body: `${text.slice(0, -1)},${JSON.stringify(first)}:{"__proto__":[]}}`, refuse: false })
      cases.push({ label: `duplicate key ${first}, hostile first`, body: `{${JSON.stringify(first)}:"\\ud800",${text.slice(1)}`, refuse: false })
    }
  }
  return cases
}

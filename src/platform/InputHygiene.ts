import { Effect, Option } from "effect"
import type { HttpServerRequest } from "effect/http"
import { summaryOf } from "./Errors.ts"

/** C0 controls other than tab, LF and CR: PostgreSQL refuses NUL in text, and none of them belongs in a field. */
const control = /[\u0000-\u0008\u000B\u000C\u000E-\u001F]/
/** A UTF-16 surrogate without its partner: no character, and PostgreSQL refuses it in JSON. */
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

export const maxDepth = 32
export const maxKeys = 1_000
/** A string field whose contract declares no maximum of its own. */
export const maxFieldLength = 255
/** A string where the contract gives no schema: inside free-form objects (custom fields, settings, metadata). */
export const maxFreeTextLength = 4_096
/** A key of a JSON object. */
export const maxKeyLength = 255
/** Ids are `bigint` columns read as JS numbers: positive, and exact as a double. */
export const maxId = Number.MAX_SAFE_INTEGER

export type Issues = Record<string, Array<string>>

const label = (field: string) => field.replace(/_/g, " ")
// Issues are keyed by user-chosen names (`__proto__` included), so they live in prototype-less objects.
const makeIssues = (): Issues => Object.create(null)
const add = (issues: Issues, field: string, message: string) => {
  const list = Object.hasOwn(issues, field) ? issues[field] : (issues[field] = [])
  if (!list.includes(message)) list.push(message)
}

const checkString = (issues: Issues, field: string, value: string, max: number | undefined) => {
  if (control.test(value)) add(issues, field, `The ${label(field)} field must not contain control characters.`)
  if (loneSurrogate.test(value)) add(issues, field, `The ${label(field)} field must be valid Unicode text.`)
  if (max !== undefined && value.length > max) add(issues, field, `The ${label(field)} field must not be greater than ${max} characters.`)
}

/** Keys that name an id (`id`, `contact_id`, `segmentId`) and lists of them (`contact_ids`). */
const idKey = /(^|_)id$|[a-z]Id$/
const idsKey = /(^|_)ids$|[a-z]Ids$/

const checkId = (issues: Issues, field: string, value: unknown) => {
  if (typeof value !== "number") return
  if (!Number.isInteger(value) || value < 1 || value > maxId) add(issues, field, `The selected ${label(field)} is invalid.`)
}

type JsonSchema = { readonly [key: string]: any }

/** A request body's schema in the OpenAPI document, with the document's named schemas its `$ref`s point at. */
export interface BodyContract {
  readonly schema: JsonSchema
  readonly components: Readonly<Record<string, JsonSchema>>
}

const resolve = (contract: BodyContract, schema: JsonSchema | undefined): JsonSchema | undefined => {
  let node = schema
  for (let hops = 0; node !== undefined && typeof node.$ref === "string" && hops < 32; hops++) {
    node = contract.components[decodeURIComponent(node.$ref.replace(/^#\/components\/schemas\//, ""))]
  }
  return node
}

/** The schema and every branch of its unions, resolved. */
const branches = (contract: BodyContract, schema: JsonSchema | undefined, depth = 0): Array<JsonSchema> => {
  const node = resolve(contract, schema)
  if (node === undefined || depth > 8) return []
  const union = [...(node.anyOf ?? []), ...(node.oneOf ?? []), ...(node.allOf ?? [])] as Array<JsonSchema>
  return [node, ...union.flatMap((branch) => branches(contract, branch, depth + 1))]
}

const typesOf = (node: JsonSchema): Array<string> => (Array.isArray(node.type) ? node.type : node.type === undefined ? [] : [node.type])

/**
 * The most characters a string may have where `schema` stands: what the contract declares (its own check
 * answers then, so none here), else `maxFieldLength` for a typed field, `maxFreeTextLength` where the
 * contract says nothing.
 */
const stringLimit = (contract: BodyContract | undefined, schema: JsonSchema | undefined): number | undefined => {
  if (contract === undefined || schema === undefined) return maxFreeTextLength
  const nodes = branches(contract, schema)
  const strings = nodes.filter((node) => typesOf(node).includes("string") || node.enum !== undefined || node.const !== undefined)
  if (strings.some((node) => node.maxLength !== undefined || node.enum !== undefined || node.const !== undefined)) return undefined
  return nodes.some((node) => typesOf(node).length > 0 || node.properties !== undefined || node.items !== undefined) ? maxFieldLength : maxFreeTextLength
}

const childSchema = (contract: BodyContract | undefined, schema: JsonSchema | undefined, key: string | number) => {
  if (contract === undefined || schema === undefined) return undefined
  for (const node of branches(contract, schema)) {
    if (typeof key === "number") {
      if (node.items !== undefined) return node.items as JsonSchema
      continue
    }
    if (node.properties !== undefined && Object.hasOwn(node.properties, key)) return node.properties[key] as JsonSchema
  }
  for (const node of branches(contract, schema)) {
    if (node.additionalProperties !== undefined && typeof node.additionalProperties === "object") return node.additionalProperties as JsonSchema
  }
  return undefined
}

/** A field the contract types as a number: ids in free-form objects are the client's own data. */
const isIdField = (contract: BodyContract | undefined, schema: JsonSchema | undefined) =>
  contract === undefined || (schema !== undefined && branches(contract, schema).some((node) => typesOf(node).some((t) => t === "integer" || t === "number")))

/**
 * Every string, key, id, depth and key count of a parsed JSON body, against the limits above; with the
 * operation's contract, string lengths against what it declares.
 */
export const inspectJson = (body: unknown, contract?: BodyContract): Issues => {
  const issues = makeIssues()
  let keys = 0
  const walk = (value: unknown, path: ReadonlyArray<string>, depth: number, schema: JsonSchema | undefined, ids: boolean): void => {
    const field = path.length === 0 ? "body" : path.join(".")
    if (typeof value === "string") return checkString(issues, field, value, stringLimit(contract, schema))
    if (ids) return checkId(issues, field, value)
    if (value === null || typeof value !== "object") return
    if (depth >= maxDepth) return add(issues, field, `The request body is nested too deeply (at most ${maxDepth} levels).`)
    if (Array.isArray(value)) {
      const items = childSchema(contract, schema, 0)
      const idList = path.length > 0 && idsKey.test(path[path.length - 1]) && isIdField(contract, items)
      value.forEach((item, i) => walk(item, [...path, String(i)], depth + 1, items, idList))
      return
    }
    for (const key of Object.keys(value)) {
      keys++
      if (keys === maxKeys + 1) add(issues, "body", `The request body has too many keys (at most ${maxKeys}).`)
      if (keys > maxKeys) return
      if (control.test(key) || loneSurrogate.test(key) || key.length > maxKeyLength) {
        add(issues, field, `Field names must be at most ${maxKeyLength} characters of text without control characters.`)
        continue
      }
      const child = childSchema(contract, schema, key)
      walk((value as Record<string, unknown>)[key], [...path, key], depth + 1, child, idKey.test(key) && isIdField(contract, child))
    }
  }
  walk(body, [], 0, contract?.schema, false)
  return issues
}

/** Query parameters and path segments, decoded, free of control characters. */
export const inspectUrl = (url: string): Issues => {
  const issues = makeIssues()
  const at = url.indexOf("?")
  const path = at < 0 ? url : url.slice(0, at)
  for (const segment of path.split("/")) {
    const decoded = Option.liftThrowable(decodeURIComponent)(segment)
    if (Option.isSome(decoded) && control.test(decoded.value)) add(issues, "path", "The path must not contain control characters.")
  }
  if (at >= 0) {
    for (const [key, value] of new URLSearchParams(url.slice(at + 1))) {
      checkString(issues, key, value, maxFreeTextLength)
      if (control.test(key)) add(issues, "query", "Query parameter names must not contain control characters.")
    }
  }
  return issues
}

const contracts: Array<{ readonly method: string; readonly pattern: RegExp; readonly params: number; readonly contract: BodyContract }> = []

/**
 * The JSON request bodies of the OpenAPI document, by method and path, so each body's strings are held to
 * the limits of its own contract. Set by `src/Http.ts` from the document `/openapi.json` serves.
 */
export const registerBodyContracts = (document: { readonly paths?: unknown; readonly components?: { readonly schemas?: unknown } }) => {
  const components = (document.components?.schemas ?? {}) as Record<string, JsonSchema>
  contracts.length = 0
  for (const [path, item] of Object.entries((document.paths ?? {}) as Record<string, Record<string, JsonSchema>>)) {
    for (const [method, operation] of Object.entries(item)) {
      const schema = operation?.requestBody?.content?.["application/json"]?.schema as JsonSchema | undefined
      if (schema === undefined) continue
      const parts = path.split(/\{[^}]+\}/)
      const source = parts.map((part) => part.replace(/[.*+?^$()|[\]\\]/g, "\\$&")).join("[^/]+")
      contracts.push({ method: method.toUpperCase(), pattern: new RegExp(`^${source}/?$`), params: parts.length - 1, contract: { schema, components } })
    }
  }
  // A literal segment wins over a parameter (`/segments/estimate` over `/segments/{segment}`).
  contracts.sort((a, b) => a.params - b.params)
}

const contractOf = (method: string, url: string) => {
  const path = url.split("?")[0]
  return contracts.find((entry) => entry.method === method && entry.pattern.test(path))?.contract
}

/** `Idempotency-Key`: 1–255 printable ASCII characters (spaces included). */
const idempotencyKey = /^[\u0020-\u007E]{1,255}$/

export const inspectHeaders = (headers: Readonly<Record<string, string | undefined>>): Issues => {
  const issues = makeIssues()
  const key = headers["idempotency-key"]
  if (key !== undefined && !idempotencyKey.test(key)) {
    add(issues, "idempotency_key", "The idempotency key must be 1 to 255 printable ASCII characters.")
  }
  return issues
}

const isJson = (contentType: string | undefined) =>
  contentType !== undefined && /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(contentType)

const utf8 = new TextDecoder("utf-8", { fatal: true })

export type Verdict =
  | { readonly _tag: "Clean" }
  | { readonly _tag: "Invalid"; readonly message: string; readonly errors: Issues }
  | { readonly _tag: "Unreadable"; readonly message: string }

const invalid = (errors: Issues): Verdict => ({ _tag: "Invalid", message: summaryOf(errors), errors })

/**
 * The one place every request's strings are checked, before any handler: URL, the headers handlers
 * use, and JSON bodies (read once here; the body is cached, so handlers decode the same bytes).
 * Provider webhooks (`/hooks/…`) are throttled before their body is read, so their bodies are left
 * to their own verification.
 */
export const inspectRequest = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const issues = Object.assign(makeIssues(), inspectUrl(request.url), inspectHeaders(request.headers))
    if (Object.keys(issues).length > 0) return invalid(issues)
    if (request.method === "GET" || request.method === "HEAD" || request.url.startsWith("/hooks/")) return { _tag: "Clean" } as Verdict
    if (!isJson(request.headers["content-type"])) return { _tag: "Clean" } as Verdict
    const bytes = yield* Effect.option(request.arrayBuffer)
    if (Option.isNone(bytes)) return { _tag: "Clean" } as Verdict
    const text = Option.liftThrowable(() => utf8.decode(bytes.value))()
    if (Option.isNone(text)) return { _tag: "Unreadable", message: "The request body is not valid UTF-8." } as Verdict
    // Malformed JSON is left to the handler's decoder, which answers it in the documented 422 shape.
    const parsed = Option.liftThrowable(JSON.parse)(text.value)
    if (Option.isNone(parsed)) return { _tag: "Clean" } as Verdict
    const found = inspectJson(parsed.value, contractOf(request.method, request.url))
    return Object.keys(found).length > 0 ? invalid(found) : ({ _tag: "Clean" } as Verdict)
  })

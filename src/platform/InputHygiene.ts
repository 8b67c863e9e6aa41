import { Effect, Option } from "effect"
import type { HttpServerRequest } from "effect/http"
import { summaryOf } from "./Errors.ts"

/** C0 controls other than tab, LF and CR: PostgreSQL refuses NUL in text, and none of them belongs in a field. */
const control = /[\u0000-\u0008\u000B\u000C\u000E-\u001F]/
const prototypeKeys = new Set(["__proto__", "constructor", "prototype"])

export const maxDepth = 32
export const maxKeys = 1_000

export type Issues = Record<string, Array<string>>

const label = (field: string) => field.replace(/_/g, " ")
// Issues are keyed by user-chosen names (`__proto__` included), so they live in prototype-less objects.
const makeIssues = (): Issues => Object.create(null)
const add = (issues: Issues, field: string, message: string) => {
  const list = Object.hasOwn(issues, field) ? issues[field] : (issues[field] = [])
  if (!list.includes(message)) list.push(message)
}

const checkString = (issues: Issues, field: string, value: string) => {
  if (control.test(value)) add(issues, field, `The ${label(field)} field must not contain control characters.`)
}

/** Every string, key, depth and key count of a parsed JSON body, against the limits above. */
export const inspectJson = (body: unknown): Issues => {
  const issues = makeIssues()
  let keys = 0
  const walk = (value: unknown, path: ReadonlyArray<string>, depth: number): void => {
    const field = path.length === 0 ? "body" : path.join(".")
    if (typeof value === "string") return checkString(issues, field, value)
    if (value === null || typeof value !== "object") return
    if (depth >= maxDepth) return add(issues, field, `The request body is nested too deeply (at most ${maxDepth} levels).`)
    if (Array.isArray(value)) {
      value.forEach((item, i) => walk(item, [...path, String(i)], depth + 1))
      return
    }
    for (const key of Object.keys(value)) {
      keys++
      if (keys === maxKeys + 1) add(issues, "body", `The request body has too many keys (at most ${maxKeys}).`)
      if (keys > maxKeys) return
      const child = path.length === 0 ? key : `${field}.${key}`
      if (prototypeKeys.has(key)) {
        add(issues, child, `The field name ${key} is not allowed.`)
        continue
      }
      if (control.test(key)) {
        add(issues, field, "Field names must not contain control characters.")
        continue
      }
      walk((value as Record<string, unknown>)[key], [...path, key], depth + 1)
    }
  }
  walk(body, [], 0)
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
      checkString(issues, key, value)
      if (control.test(key)) add(issues, "query", "Query parameter names must not contain control characters.")
    }
  }
  return issues
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
    const found = inspectJson(parsed.value)
    return Object.keys(found).length > 0 ? invalid(found) : ({ _tag: "Clean" } as Verdict)
  })

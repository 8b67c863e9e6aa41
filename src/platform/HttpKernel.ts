import { Cause, Context, Duration, Effect, Option, Predicate, Schema, SchemaIssue, type Types } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
import { SqlError } from "effect/sql"
import { randomUUID } from "node:crypto"
import { compressed } from "./Compression.ts"
import * as Errors from "./Errors.ts"
import { inspectRequest } from "./InputHygiene.ts"
import { loggablePath, log } from "./Logging.ts"
import { observeRequest } from "./Metrics.ts"
import { sqlRefusal } from "./SqlRefusals.ts"

/** Per-request state shared between the kernel middleware and anything deeper (auth, limiters). */
export interface RequestState {
  readonly requestId: string
  readonly headers: Record<string, string>
}

export const CurrentRequest = Context.Reference<RequestState | undefined>("crm/platform/CurrentRequest", {
  defaultValue: () => undefined
})

/** How long a handler may take before the client gets 503 (REQUEST_DEADLINE_MS); uploads are exempt. */
export const RequestDeadline = Context.Reference<Duration.Duration>("crm/platform/RequestDeadline", {
  defaultValue: () => Duration.seconds(30)
})

export const deadlineMessage = "The request could not be completed in time; retry shortly."

/** Multipart uploads stream their body through the handler, so they may take as long as the client sends. */
const streamsBody = (request: HttpServerRequest.HttpServerRequest) =>
  /^multipart\//i.test(request.headers["content-type"] ?? "")

/** Adds headers to the final answer, whatever it turns out to be (success or error). */
/** The peer's address, as the throttles key clients (no proxy headers are trusted). */
export const clientIp = (request: HttpServerRequest.HttpServerRequest) => Option.getOrElse(request.remoteAddress, () => "unknown")

export const addResponseHeaders = (headers: Record<string, string>) =>
  Effect.gen(function*() {
    const state = yield* CurrentRequest
    if (state !== undefined) Object.assign(state.headers, headers)
  })

const validRequestId = /^[A-Za-z0-9._:-]{1,128}$/

const knownRoutes: Array<{ readonly path: string; readonly pattern: RegExp; readonly methods: Set<string> }> = []
/** The known paths without parameters, looked up before the patterns are tried. */
const staticRoutes = new Set<string>()

/**
 * The paths the app serves and their methods (the OpenAPI document plus the plain routes), so a
 * known path asked with another method is 405 with `Allow` rather than 404. Set by `src/Http.ts`.
 */
export const registerKnownRoutes = (routes: Iterable<readonly [method: string, path: string]>) => {
  const byPath = new Map<string, Set<string>>()
  for (const [method, path] of routes) {
    const methods = byPath.get(path) ?? new Set()
    methods.add(method.toUpperCase())
    if (method.toUpperCase() === "GET") methods.add("HEAD")
    byPath.set(path, methods)
  }
  knownRoutes.length = 0
  staticRoutes.clear()
  for (const [path, methods] of byPath) {
    const parts = path.split(/\{[^}]+\}|:[A-Za-z_]+/)
    if (parts.length === 1) staticRoutes.add(path)
    const source = parts.map((part) => part.replace(/[.*+?^$()|[\]\\]/g, "\\$&")).join("[^/]+")
    knownRoutes.push({ path, pattern: new RegExp(`^${source}/?$`), methods })
  }
}

/**
 * The route template a request path matches (`/v1/contacts/{id}`), the label of its metrics; `unmatched`
 * for any other path, so that scanners' paths do not each become a series.
 */
export const routeTemplate = (url: string) => {
  const at = url.indexOf("?")
  const path = at < 0 ? url : url.slice(0, at)
  if (staticRoutes.has(path)) return path
  for (const route of knownRoutes) if (route.pattern.test(path)) return route.path
  return "unmatched"
}

const methodOrder = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

const allowedMethods = (path: string) => {
  const methods = new Set<string>()
  for (const route of knownRoutes) if (route.pattern.test(path)) for (const m of route.methods) methods.add(m)
  return methodOrder.filter((m) => methods.has(m))
}

const malformedJson = (error: HttpApiError.HttpApiSchemaError) =>
  error.kind === "Payload" &&
  formatIssues(error.cause.issue).issues.some((issue) => (issue.path ?? []).length === 0 && issue.message.includes("JSON"))

/** A wire error class with its status: the encoder is built once, typed by the class. */
const wire = <A, I>(cls: Schema.Codec<A, I>, status: number) => {
  const is = Schema.is(cls)
  const encode = Schema.encodeSync(cls)
  return (error: unknown) => is(error) ? json(status, encode(error)) : undefined
}

const wireEncoders = [
  wire(Errors.Unauthenticated, 401),
  wire(Errors.Forbidden, 403),
  wire(Errors.FeatureNotAvailable, 403),
  wire(Errors.NotFound, 404),
  wire(Errors.Conflict, 409),
  wire(Errors.CsrfMismatch, 419),
  wire(Errors.Unprocessable, 422),
  wire(Errors.TooManyRequests, 429),
  wire(Errors.ServiceUnavailable, 503),
  wire(Errors.BadGateway, 502)
]

const json = (status: number, body: unknown) => HttpServerResponse.jsonUnsafe(body, { status })

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

const fieldLabel = (field: string) => field.replace(/_/g, " ")

const typeWords: Record<string, string> = {
  string: "text",
  number: "a number",
  int: "a whole number",
  integer: "a whole number",
  bigint: "a whole number",
  boolean: "true or false",
  null: "null",
  array: "a list",
  ReadonlyArray: "a list",
  object: "an object",
  Record: "an object"
}

/** `Expected string | null | null` → `text or null`; undefined when the schema text names something else. */
const expectedInWords = (expected: string): string | undefined => {
  const alternatives = [...new Set(expected.split("|").map((part) => part.trim()).filter((part) => part !== "undefined"))]
  const literals = alternatives.map((part) => /^"(.*)"$/.exec(part)?.[1] ?? (/^-?\d+(\.\d+)?$/.test(part) ? part : undefined))
  if (literals.every((literal) => literal !== undefined)) {
    return literals.length === 1 ? `"${literals[0]}"` : `one of: ${literals.join(", ")}`
  }
  const words: Array<string> = []
  for (const part of alternatives) {
    const word = typeWords[part.replace(/<.*$/, "")] ?? (part.startsWith("{") ? typeWords.object : part.endsWith("[]") ? typeWords.array : undefined)
    if (word === undefined) return undefined
    if (!words.includes(word)) words.push(word)
  }
  return words.join(" or ")
}

const fieldMessage = (field: string, message: string) => {
  const label = fieldLabel(field)
  if (message === "Missing key") return `The ${label} field is required.`
  if (message === "Unexpected key") return `The ${label} field is not allowed here.`
  if (message.startsWith("Expected ")) {
    const words = expectedInWords(message.slice("Expected ".length).replace(/, got .*$/, "").replace(/\.$/, ""))
    return words === undefined ? `The ${label} field has an invalid value.` : `The ${label} field must be ${words}.`
  }
  if (message.startsWith("The ")) return message
  return `The ${label} field is invalid: ${message.slice(0, 1).toLowerCase()}${message.slice(1).replace(/\.?$/, ".")}`
}

/** Schema decode failures become the spec's 422 `{message, errors:{field:[…]}}`, keyed by field path. */
export const validationResponse = (error: HttpApiError.HttpApiSchemaError) => {
  const errors = Errors.fieldErrors()
  for (const issue of formatIssues(error.cause.issue).issues) {
    const path = (issue.path ?? []).map((s) => String(typeof s === "object" && s !== null ? s.key : s))
    const field = path.length > 0 ? path.join(".") : error.kind === "Payload" ? "body" : error.kind.toLowerCase()
    const message = field === "body" && issue.message.includes("JSON")
      ? "The request body must be valid JSON."
      : field === "body"
      ? "The request body must be a JSON object."
      : fieldMessage(field, issue.message)
    Errors.addFieldError(errors, field, message)
  }
  return json(422, { message: Errors.summaryOf(errors), errors })
}

const encodeWire = (error: unknown) => {
  for (const encode of wireEncoders) {
    const response = encode(error)
    if (response !== undefined) return response
  }
  return undefined
}

/** A database that cannot be reached (restarting, network): the client can retry, so it is 503, not 500. */
const databaseUnavailable = (error: unknown) =>
  SqlError.isSqlError(error) &&
  (error.reason._tag === "ConnectionError" || error.reason._tag === "AuthenticationError" || operatorIntervention(error.reason.cause))

// SQLSTATE 57P01-57P03: the server is shutting down, crashed or still starting up ("the database
// system is starting up" answers every connection for a moment after a restart); the driver calls them unknown.
const operatorIntervention = (cause: unknown) =>
  Predicate.hasProperty(cause, "code") && typeof cause.code === "string" && /^57P0[123]$/.test(cause.code)

/** A concurrent-write conflict goes through on a retry a moment later; a field refusal does not. */
const retryAfter = (refusal: Errors.Unprocessable | Errors.Conflict): Record<string, string> =>
  refusal instanceof Errors.Conflict ? { "retry-after": "1" } : {}

const render = (cause: Cause.Cause<unknown>, requestId: string) =>
  Effect.gen(function*() {
    if (Cause.hasInterruptsOnly(cause)) return HttpServerResponse.empty({ status: 499 })
    const error = Cause.squash(cause)
    if (HttpApiError.HttpApiSchemaError.is(error) && error.kind !== "Body" && error.kind !== "ResponseHeaders") {
      if (malformedJson(error)) return json(400, { message: "The request body must be valid JSON." })
      return validationResponse(error)
    }
    if (HttpApiError.HttpApiPayloadTooLarge.is(error)) return json(413, { message: "Payload too large." })
    if (HttpServerError.isHttpServerError(error)) {
      const reason = error.reason
      if (reason._tag === "RouteNotFound") {
        const pathname = reason.request.url.split("?")[0]
        const path = pathname.replace(/^\//, "")
        const allow = allowedMethods(pathname)
        if (allow.length > 0) {
          return HttpServerResponse.jsonUnsafe({
            message: `The ${reason.request.method} method is not supported for route ${path}. Supported methods: ${allow.join(", ")}.`
          }, { status: 405, headers: { allow: allow.join(", ") } })
        }
        return json(404, { message: `The route ${path} could not be found.` })
      }
      if (reason._tag === "RequestParseError") {
        if (reason.reason === "BodyTooLarge") return json(413, { message: "Payload too large." })
        return json(400, { message: "The request could not be read." })
      }
    }
    const wire = encodeWire(error)
    if (wire !== undefined) return wire
    const refusal = sqlRefusal(error)
    if (Option.isSome(refusal)) {
      yield* Effect.logWarning("database refused a write the request raced", { request_id: requestId, cause: Cause.pretty(cause) })
      return HttpServerResponse.setHeaders(encodeWire(refusal.value) ?? json(409, { message: refusal.value.message }), retryAfter(refusal.value))
    }
    if (databaseUnavailable(error)) {
      yield* Effect.logWarning("database unavailable", { request_id: requestId })
      return HttpServerResponse.jsonUnsafe({ message: "Service temporarily unavailable." }, { status: 503, headers: { "retry-after": "5" } })
    }
    yield* Effect.logError("unhandled failure", { request_id: requestId }).pipe(Effect.annotateLogs({ request_id: requestId }), Effect.andThen(Effect.logError(cause)))
    return json(500, { message: "Server Error" })
  })

const refusalMessages: Record<number, string> = {
  400: "The request could not be read.",
  404: "Not found.",
  405: "The method is not supported for this route.",
  413: "Payload too large.",
  415: "The request body must be JSON (Content-Type: application/json).",
  431: "The request headers are too large."
}

const isJsonBody = (response: HttpServerResponse.HttpServerResponse) =>
  response.body._tag === "Uint8Array" && /json/i.test(response.body.contentType ?? "")

/**
 * Every refusal is JSON `{message}`: the API builder answers some itself, before a handler runs or from
 * a raw handler's body read (a content type no endpoint declares: plain-text 415; a provider hook body
 * past the limit: an empty 413), and those are given the documented body here.
 */
const jsonRefusal = (request: HttpServerRequest.HttpServerRequest, response: HttpServerResponse.HttpServerResponse) => {
  if (response.status < 400 || response.status === 499 || request.method === "HEAD" || isJsonBody(response)) return response
  if (response.body._tag === "Stream") return response
  const message = refusalMessages[response.status] ?? "The request was refused."
  // The refusal's own headers (Allow, Retry-After) stay; its content type is the body's, now JSON.
  const { "content-type": _type, "content-length": _length, ...headers } = response.headers
  return HttpServerResponse.jsonUnsafe({ message }, { status: response.status, headers })
}

// The router's typing wants middleware to leave errors it was not told about;
// this one renders every failure itself, so its own error channel is empty.
const rendersAll = <A, R>(effect: Effect.Effect<A, never, R>): Effect.Effect<A, Types.unhandled, R> => effect

export const KernelMiddleware = HttpRouter.middleware((httpEffect) =>
  rendersAll(Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const incoming = request.headers["x-request-id"]
    const requestId = incoming !== undefined && validRequestId.test(incoming) ? incoming : randomUUID()
    const state: RequestState = { requestId, headers: {} }
    const started = performance.now()
    const guarded = Effect.flatMap(inspectRequest(request), (verdict) =>
      verdict._tag === "Clean"
        ? httpEffect
        : Effect.succeed(
          verdict._tag === "Invalid"
            ? json(422, { message: verdict.message, errors: verdict.errors })
            : json(400, { message: verdict.message })
        ))
    const deadline = yield* RequestDeadline
    const bounded = streamsBody(request) ? guarded : guarded.pipe(
      Effect.timeoutOrElse({
        duration: deadline,
        orElse: () =>
          Effect.logWarning("request deadline passed").pipe(
            Effect.as(json(503, { message: deadlineMessage }))
          )
      })
    )
    const response = yield* bounded.pipe(
      Effect.provideService(CurrentRequest, state),
      Effect.annotateLogs({ request_id: requestId }),
      Effect.catchCause((cause) => render(cause, requestId))
    )
    state.headers["x-request-id"] = requestId
    const final = yield* compressed(request.headers["accept-encoding"], HttpServerResponse.setHeaders(jsonRefusal(request, response), state.headers))
    observeRequest(request.method, routeTemplate(request.url), final.status, (performance.now() - started) / 1000)
    if (log.isLevelEnabled("info")) {
      log.info({
        request_id: requestId,
        method: request.method,
        path: loggablePath(request.url),
        status: final.status,
        ms: Math.round((performance.now() - started) * 100) / 100
      }, "request")
    }
    return final
  })), { global: true })

import { Effect, Option, Schema } from "effect"

// Wire errors carry no `_tag`: the spec's bodies are exactly these fields.

export class Unauthenticated extends Schema.Error<Unauthenticated>("Unauthenticated")({
  message: Schema.String
}, { httpApiStatus: 401 }) {}
export const unauthenticated = () => new Unauthenticated({ message: "Unauthenticated." })

export class Forbidden extends Schema.Error<Forbidden>("Forbidden")({
  message: Schema.String
}, { httpApiStatus: 403 }) {}
export const forbidden = (message = "This action is unauthorized.") => new Forbidden({ message })

export class FeatureNotAvailable extends Schema.Error<FeatureNotAvailable>("FeatureNotAvailable")({
  message: Schema.String,
  error: Schema.Literal("feature_not_available"),
  feature: Schema.String,
  required_plan: Schema.NullOr(Schema.String)
}, { httpApiStatus: 403 }) {}

export class NotFound extends Schema.Error<NotFound>("NotFound")({
  message: Schema.String
}, { httpApiStatus: 404 }) {}
export const notFound = (message = "Not found.") => new NotFound({ message })
/**
 * The value of a row read back by the request that wrote or checked it: a concurrent request may have
 * deleted it in between, which answers as the later request would, 404.
 */
export const orNotFound = <A>(option: Option.Option<A>, message = "Not found."): Effect.Effect<A, NotFound> =>
  Option.isSome(option) ? Effect.succeed(option.value) : Effect.fail(notFound(message))

export class Conflict extends Schema.Error<Conflict>("Conflict")({
  message: Schema.String,
  /** Set where a client must tell conflicts apart (an idempotency key's `outcome_unknown`). */
  reason: Schema.optionalKey(Schema.String)
}, { httpApiStatus: 409 }) {}

export class CsrfMismatch extends Schema.Error<CsrfMismatch>("CsrfMismatch")({
  message: Schema.String
}, { httpApiStatus: 419 }) {}
export const csrfMismatch = () => new CsrfMismatch({ message: "CSRF token mismatch." })

export class Unprocessable extends Schema.Error<Unprocessable>("Unprocessable")({
  message: Schema.String,
  errors: Schema.optionalKey(Schema.Record(Schema.String, Schema.Array(Schema.String))),
  error_code: Schema.optionalKey(Schema.String)
}, { httpApiStatus: 422 }) {}
/** The 422 summary line: the first message, then how many more there are. */
export const summaryOf = (errors: Record<string, ReadonlyArray<string>>, fallback = "The given data was invalid.") => {
  const messages = Object.values(errors).flat()
  const extra = messages.length - 1
  return messages.length === 0 ? fallback : extra > 0 ? `${messages[0]} (and ${extra} more error${extra > 1 ? "s" : ""})` : messages[0]
}
/**
 * An empty field → messages map. Fields are named after the client's keys (`toString`, `__proto__` among
 * them), so the map has no prototype whose members a key could hit.
 */
export const fieldErrors = (): Record<string, Array<string>> => Object.create(null)
/** Adds a message to a field of a `fieldErrors()` map. */
export const addFieldError = (errors: Record<string, Array<string>>, field: string, message: string) => {
  ;(Object.hasOwn(errors, field) ? errors[field] : (errors[field] = [])).push(message)
}
/** 422 on several fields: `{message, errors:{field:[…]}}`. */
export const invalidFields = (errors: Record<string, Array<string>>) => new Unprocessable({ message: summaryOf(errors), errors })
/** 422 on one field: `{message, errors:{field:[message]}}`. */
export const invalidField = (field: string, message: string) => new Unprocessable({ message, errors: { [field]: [message] } })
/** 422 for a business rule: `{message, error_code}`. */
export const ruleViolation = (error_code: string, message: string) => new Unprocessable({ message, error_code })

export class TooManyRequests extends Schema.Error<TooManyRequests>("TooManyRequests")({
  message: Schema.String,
  retry_after: Schema.Int
}, { httpApiStatus: 429 }) {}
export const tooManyRequests = (retryAfter: number) =>
  new TooManyRequests({ message: "Too Many Requests.", retry_after: retryAfter })

export class ServiceUnavailable extends Schema.Error<ServiceUnavailable>("ServiceUnavailable")({
  message: Schema.String
}, { httpApiStatus: 503 }) {}

export class BadGateway extends Schema.Error<BadGateway>("BadGateway")({
  message: Schema.String
}, { httpApiStatus: 502 }) {}

/** What every authenticated endpoint may answer besides its own errors. */
export const AuthErrors = [Unauthenticated, Forbidden, FeatureNotAvailable, TooManyRequests, CsrfMismatch] as const

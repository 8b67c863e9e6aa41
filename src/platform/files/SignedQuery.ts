import { Option, Schema } from "effect"
import { Forbidden, NotFound, TooManyRequests } from "../Errors.ts"

/** The query every signed route accepts (`c`: the company the link was made for); routes add their own keys. */
export const signedQuery = {
  c: Schema.optional(Schema.String),
  expires: Schema.optional(Schema.String),
  signature: Schema.optional(Schema.String)
}

/** The company a signed link names (`c`), when it is a plausible id; a signed route answers 404 otherwise. */
export const signedCompany = (c: string | undefined): Option.Option<number> =>
  Option.filter(Option.fromNullishOr(c), (value) => /^[1-9]\d{0,15}$/.test(value)).pipe(Option.map(Number))

/** What a signed route can answer besides its bytes: bad signature, nothing there, over the per-IP limit. */
export const SignedRouteErrors = [Forbidden, NotFound, TooManyRequests] as const

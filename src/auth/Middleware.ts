import { HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import { CsrfMismatch, TooManyRequests, Unauthenticated } from "../platform/Errors.ts"
import { CurrentActor } from "./Domain.ts"

export const SessionCookie = "crm_session"
export const XsrfCookie = "XSRF-TOKEN"
export const XsrfHeader = "x-xsrf-token"

/** Bearer token `<id>|<secret>`, or the cabinet's session cookie (`crm_session`) with `X-XSRF-TOKEN` on state-changing requests. */
export class Authentication extends HttpApiMiddleware.Service<Authentication, {
  provides: CurrentActor
  requires: never
}>()("crm/auth/Authentication", {
  // One scheme on purpose: with several, a failure of the first (say a 429 on a valid
  // token) would be reported as the last one's 401. The bearer handler falls back to
  // the session cookie when no Authorization header is sent.
  // "bearer" in lower case: OpenAPI tools (Scalar) match the scheme name exactly, and "Bearer" made them offer Basic.
  security: { bearer: HttpApiSecurity.http({ scheme: "bearer" }) },
  error: [Unauthenticated, CsrfMismatch, TooManyRequests]
}) {}

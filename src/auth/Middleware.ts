import { HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import { CsrfMismatch, TooManyRequests, Unauthenticated } from "../platform/Errors.ts"
import { CurrentActor } from "./Domain.ts"

export const SessionCookie = "crm_session"
export const XsrfCookie = "XSRF-TOKEN"
export const XsrfHeader = "x-xsrf-token"

/** Bearer token `<id>|<secret>`, or the cabinet's session cookie with `X-XSRF-TOKEN` on state-changing requests. */
export class Authentication extends HttpApiMiddleware.Service<Authentication, {
  provides: CurrentActor
  requires: never
}>()("crm/auth/Authentication", {
  security: {
    bearer: HttpApiSecurity.bearer,
    session: HttpApiSecurity.apiKey({ in: "cookie", key: SessionCookie })
  },
  error: [Unauthenticated, CsrfMismatch, TooManyRequests]
}) {}

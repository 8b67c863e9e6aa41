import { Context } from "effect"
import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import { CsrfMismatch, FeatureNotAvailable, Forbidden, TooManyRequests, Unauthenticated } from "../platform/Errors.ts"
import { CurrentActor } from "./Domain.ts"
import type { Feature } from "./Plans.ts"

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

/** The plan feature an endpoint needs; set through `requiresFeature`. */
export class RequiredFeature extends Context.Service<RequiredFeature, Feature>()("crm/auth/RequiredFeature") {}

/**
 * What a gated group puts on each of its endpoints (`.annotateEndpointsMerge(requiresFeature("deals"))`, with
 * `PlanGate` among its middlewares): the feature the gate checks, and `x-required-feature` on the operation
 * in the OpenAPI document, so clients and tests read the gated routes from the document.
 */
export const requiresFeature = (feature: Feature) =>
  Context.merge(Context.make(RequiredFeature, feature), OpenApi.annotations({ override: { "x-required-feature": feature } }))

/**
 * The plan gate of an endpoint annotated with `requiresFeature`: 403 `feature_not_available` before the route's
 * params, query or body are decoded, so a plan without the feature never learns how to shape a request.
 * Declared before `Authentication` on the group, which makes it run inside it, with the actor known.
 */
export class PlanGate extends HttpApiMiddleware.Service<PlanGate, {
  requires: CurrentActor
}>()("crm/auth/PlanGate", {
  error: [FeatureNotAvailable, Forbidden]
}) {}

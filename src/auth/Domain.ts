import { Context, Effect, Schema } from "effect"
import { FeatureNotAvailable, forbidden } from "../platform/Errors.ts"
import type { Role } from "./Permissions.ts"
import { type Feature, hasFeature, type Plan, requiredPlan } from "./Plans.ts"

export const CompanyId = Schema.Int.pipe(Schema.brand("CompanyId"))
export type CompanyId = typeof CompanyId.Type
export const UserId = Schema.Int.pipe(Schema.brand("UserId"))
export type UserId = typeof UserId.Type

export type CredentialKind = "service" | "mobile" | "session"

/** The signed-in account's row, read by the same query as the credential (so `GET /v1/me` needs no other). */
export interface Account {
  readonly id: number
  readonly name: string
  readonly lastname: string | null
  readonly email: string | null
  readonly email_verified_at: Date | null
  readonly phone: string | null
  readonly phone_verified: boolean
  readonly timezone: string
  readonly locale: string
  readonly availability: string
  readonly is_service_account: boolean
  readonly current_company_id: number | null
  /** The photo's version (what the signed photo link carries), null without a photo. */
  readonly photo_version: number | null
}

export interface Actor {
  readonly userId: UserId
  readonly email: string | null
  readonly isServiceAccount: boolean
  readonly kind: CredentialKind
  readonly tokenId: number | null
  readonly sessionId: string | null
  readonly abilities: ReadonlyArray<string>
  readonly account: Account
  /** null when the account has no active company (or lost its membership there). */
  readonly company: {
    readonly id: CompanyId
    readonly plan: Plan
    /** ISO 3166-1 alpha-2: the country national phone numbers are read in; null when unset. */
    readonly defaultCountry?: string | null
    readonly role: Role
    readonly permissions: ReadonlySet<string>
  } | null
}

export class CurrentActor extends Context.Service<CurrentActor, Actor>()("crm/auth/CurrentActor") {}

export const noCompany = () => forbidden("No active company for this account.")

/** The active company of the caller, or 403 when there is none. */
export const currentCompany = Effect.gen(function*() {
  const actor = yield* CurrentActor
  if (actor.company === null) return yield* noCompany()
  return actor.company
})

export const requirePermission = (permission: string) =>
  Effect.gen(function*() {
    const company = yield* currentCompany
    if (!company.permissions.has(permission)) return yield* forbidden()
    return company
  })

export const requireFeature = (feature: Feature) =>
  Effect.gen(function*() {
    const company = yield* currentCompany
    if (!hasFeature(company.plan, feature)) {
      return yield* new FeatureNotAvailable({
        message: `Your plan does not include the ${feature} feature.`,
        error: "feature_not_available",
        feature,
        required_plan: requiredPlan(feature)
      })
    }
    return company
  })

/** Phone verification and softphone: only a person's own credentials (session or mobile token). */
export const requirePersonalCredential = Effect.gen(function*() {
  const actor = yield* CurrentActor
  if (actor.isServiceAccount || actor.kind === "service") {
    return yield* forbidden("This endpoint accepts only session or mobile-token authentication.")
  }
  return actor
})

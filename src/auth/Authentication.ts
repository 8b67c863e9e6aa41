import { Clock, Effect, Layer, Option, Redacted } from "effect"
import { HttpServerRequest } from "effect/http"
import { AppConfig } from "../platform/Config.ts"
import { safeEqual, safeEqualString, sha256 } from "../platform/Crypto.ts"
import { csrfMismatch, unauthenticated } from "../platform/Errors.ts"
import { addResponseHeaders } from "../platform/HttpKernel.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { type Account, type Actor, type CompanyId, CurrentActor, type UserId } from "./Domain.ts"
import { Authentication, SessionCookie, XsrfHeader } from "./Middleware.ts"
import { rolePermissions } from "./Permissions.ts"
import { CredentialCache } from "./Credentials.ts"
import { AuthRepo, type CredentialRow } from "./Repo.ts"

const bearerPattern = /^(\d{1,15})\|([A-Za-z0-9]{20,128})$/
const safeMethods = new Set(["GET", "HEAD", "OPTIONS"])
const touchEveryMs = 60_000

const accountOf = (row: CredentialRow): Account => ({
  id: row.id,
  name: row.name,
  lastname: row.lastname,
  email: row.email,
  email_verified_at: row.email_verified_at,
  phone: row.phone,
  phone_verified: row.phone_verified,
  timezone: row.timezone,
  locale: row.locale,
  availability: row.availability,
  is_service_account: row.is_service_account,
  current_company_id: row.current_company_id,
  photo_version: row.photo_version
})

const companyOf = (row: CredentialRow): Actor["company"] =>
  row.company_id !== null && row.role !== null && row.plan !== null
    ? {
      id: row.company_id as CompanyId,
      plan: row.plan,
      defaultCountry: row.default_country,
      role: row.role,
      permissions: rolePermissions[row.role]
    }
    : null

export const AuthenticationLayer = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const repo = yield* AuthRepo
    const cache = yield* CredentialCache
    const limiter = yield* RateLimiter
    const config = yield* AppConfig
    const rule = { limit: config.rateLimitPerWindow, windowSeconds: config.rateLimitWindowSeconds }
    const mobileTtlMs = config.mobileTokenDays * 86_400_000
    const lastTouch = new Map<number, number>()

    const limit = Effect.fnUntraced(function*(actor: Actor, bucket: string) {
      const owner = actor.company === null ? "global" as const : { companyId: actor.company.id }
      const decision = yield* limiter.enforceLeased(owner, bucket, rule).pipe(
        Effect.tapError(() => addResponseHeaders({ "x-ratelimit-limit": String(rule.limit), "x-ratelimit-remaining": "0" }))
      )
      yield* addResponseHeaders({
        "x-ratelimit-limit": String(rule.limit),
        "x-ratelimit-remaining": String(decision.remaining)
      })
    })

    const bearer = Effect.fnUntraced(function*(credential: Redacted.Redacted<string>) {
      const match = bearerPattern.exec(Redacted.value(credential))
      if (match === null) return yield* unauthenticated()
      const tokenId = Number(match[1])
      const row = yield* cache.resolve(`t:${tokenId}`, repo.findToken(tokenId))
      if (Option.isNone(row)) return yield* unauthenticated()
      const token = row.value
      if (!safeEqual(sha256(match[2]), token.secret_hash)) return yield* unauthenticated()
      const now = yield* Clock.currentTimeMillis
      if (token.expires_at !== null && token.expires_at.getTime() <= now) return yield* unauthenticated()
      if ((lastTouch.get(tokenId) ?? 0) + touchEveryMs <= now) {
        // Bounded: forgetting a token only costs one extra UPDATE on its next use.
        if (lastTouch.size >= 100_000) lastTouch.clear()
        lastTouch.set(tokenId, now)
        const expiresAt = token.kind === "mobile" ? new Date(now + mobileTtlMs) : null
        yield* Effect.forkDetach(repo.touchToken(tokenId, new Date(now), expiresAt))
      }
      const actor: Actor = {
        userId: token.user_id as UserId,
        email: token.email,
        isServiceAccount: token.is_service_account,
        kind: token.kind,
        tokenId,
        sessionId: null,
        abilities: token.abilities,
        account: accountOf(token),
        company: companyOf(token)
      }
      yield* limit(actor, `token:${tokenId}`)
      return actor
    })

    const session = Effect.fnUntraced(function*(sessionId: string | undefined) {
      if (sessionId === undefined || sessionId.length < 20 || sessionId.length > 128) return yield* unauthenticated()
      const row = yield* cache.resolve(`s:${sessionId}`, repo.findSession(sessionId))
      if (Option.isNone(row)) return yield* unauthenticated()
      const now = yield* Clock.currentTimeMillis
      if (row.value.expires_at.getTime() <= now) return yield* unauthenticated()
      const request = yield* HttpServerRequest.HttpServerRequest
      if (!safeMethods.has(request.method)) {
        const header = request.headers[XsrfHeader]
        if (header === undefined || !safeEqualString(header, row.value.csrf_token)) {
          return yield* csrfMismatch()
        }
      }
      const actor: Actor = {
        userId: row.value.user_id as UserId,
        email: row.value.email,
        isServiceAccount: row.value.is_service_account,
        kind: "session",
        tokenId: null,
        sessionId,
        abilities: ["*"],
        account: accountOf(row.value),
        company: companyOf(row.value)
      }
      yield* limit(actor, `user:${actor.userId}`)
      return actor
    })

    const authenticate = Effect.fnUntraced(function*(credential: Redacted.Redacted<string>) {
      const request = yield* HttpServerRequest.HttpServerRequest
      if (request.headers.authorization !== undefined) return yield* bearer(credential)
      return yield* session(request.cookies[SessionCookie])
    })

    return Authentication.of({
      bearer: (httpEffect, { credential }) =>
        Effect.flatMap(authenticate(credential), (actor) => Effect.provideService(httpEffect, CurrentActor, actor))
    })
  })
)

import { Context, Effect, Layer } from "effect"
import { Company, type LoggedRule, Throttle } from "../../cluster/Company.ts"
import { AppConfig } from "./Config.ts"
import { type TooManyRequests, tooManyRequests } from "./Errors.ts"
import { addResponseHeaders } from "./HttpKernel.ts"
import type { Decision } from "./SlidingWindow.ts"

export interface Rule {
  readonly limit: number
  readonly windowSeconds: number
}

/** Who owns a bucket: a company's entity (its tokens, block throttles) or the global throttle entity (per IP / e-mail). */
export type Owner = { readonly companyId: number } | "global"

export class RateLimiter extends Context.Service<RateLimiter, {
  consume(owner: Owner, bucket: string, rule: Rule): Effect.Effect<Decision>
  /** Consumes one hit and fails with 429 (+ `Retry-After`) when the bucket is full. */
  enforce(owner: Owner, bucket: string, rule: Rule): Effect.Effect<Decision, TooManyRequests>
  /**
   * Like `enforce`, over a durable log of the company's entity (its hits survive a restart): one hit
   * for `subject`, allowed only when every rule, per subject or company-wide, has room.
   */
  enforceLogged(companyId: number, log: string, subject: string, rules: ReadonlyArray<LoggedRule>): Effect.Effect<Decision, TooManyRequests>
  /** The spec's heavy-route throttle (message search, around): per token, or per user for a session. */
  heavy(companyId: number, caller: { readonly tokenId: number | null; readonly userId: number }): Effect.Effect<Decision, TooManyRequests>
}>()("crm/platform/RateLimiter") {
  static readonly layer = Layer.effect(
    RateLimiter,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const heavyRule = { limit: config.heavyRateLimitPerMinute, windowSeconds: 60 }
      const companies = yield* Company.client
      const throttles = yield* Throttle.client
      const consume = (owner: Owner, bucket: string, rule: Rule) => {
        const payload = { bucket, limit: rule.limit, windowMs: rule.windowSeconds * 1000 }
        const client = owner === "global" ? throttles(bucket) : companies(String(owner.companyId))
        return client.Consume(payload).pipe(Effect.orDie)
      }
      const refuseWhenFull = Effect.fnUntraced(function*(decision: Decision) {
        if (!decision.allowed) {
          const retryAfter = Math.ceil(decision.retryAfterMs / 1000)
          yield* addResponseHeaders({ "retry-after": String(retryAfter) })
          return yield* tooManyRequests(retryAfter)
        }
        return decision
      })
      const enforce = (owner: Owner, bucket: string, rule: Rule) => Effect.flatMap(consume(owner, bucket, rule), refuseWhenFull)
      const enforceLogged = (companyId: number, log: string, subject: string, rules: ReadonlyArray<LoggedRule>) =>
        companies(String(companyId)).ConsumeLogged({ log, subject, rules }).pipe(Effect.orDie, Effect.flatMap(refuseWhenFull))
      const heavy = (companyId: number, caller: { readonly tokenId: number | null; readonly userId: number }) =>
        enforce({ companyId }, caller.tokenId !== null ? `heavy:token:${caller.tokenId}` : `heavy:user:${caller.userId}`, heavyRule)
      return RateLimiter.of({ consume, enforce, enforceLogged, heavy })
    })
  )
}

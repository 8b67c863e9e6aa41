import { Context, Effect, Schema } from "effect"
import { type TooManyRequests, tooManyRequests } from "./Errors.ts"
import { addResponseHeaders } from "./HttpKernel.ts"
import type { Decision } from "./SlidingWindow.ts"

export interface Rule {
  readonly limit: number
  readonly windowSeconds: number
  /** A window finer than whole seconds (a provider's one-second window with a margin); wins over `windowSeconds`. */
  readonly windowMs?: number
}

export const windowMsOf = (rule: Rule) => rule.windowMs ?? rule.windowSeconds * 1000

/** Who owns a bucket: a company (its tokens, block throttles) or no company (per IP / e-mail). */
export type Owner = { readonly companyId: number } | "global"

/** A limit over a durable log: counted over the hits of the same subject, or of the whole company. */
export const LoggedRule = Schema.Struct({
  scope: Schema.Literals(["subject", "company"]),
  limit: Schema.Int,
  windowMs: Schema.Int
})
export type LoggedRule = typeof LoggedRule.Type

/** What a rate-limit backend decides; `cluster/` implements it with the entity that owns each bucket. */
export interface RateLimitBackend {
  consume(owner: Owner, bucket: string, rule: Rule): Effect.Effect<Decision>
  /**
   * One hit spent from a slice of the bucket this runner leased from its owner: as exact as
   * `consume` (leased units count as used), with one round trip per slice instead of per hit;
   * `remaining` is off by at most the slices outstanding.
   */
  consumeLeased(owner: Owner, bucket: string, rule: Rule): Effect.Effect<Decision>
  /**
   * Runs `use` on one unit of a leased slice, waiting for a unit first: the unit counts in the window
   * until `use` ends, not only from when it was taken. A provider counts a request when it arrives,
   * which is somewhere between the two; counted at the answer, a request slow on its way still cannot
   * land in a later window beside that window's own.
   */
  spendLeased<A, E, R>(owner: Owner, bucket: string, rule: Rule, use: Effect.Effect<A, E, R>): Effect.Effect<A, E, R>
  /** One hit on a log whose hits survive a restart: allowed only when every rule has room. */
  consumeLogged(companyId: number, log: string, subject: string, rules: ReadonlyArray<LoggedRule>): Effect.Effect<Decision>
  /** No slice of the bucket for `forMs`, on every runner: its owner refuses leases, and this runner drops its slice. */
  pause(owner: Owner, bucket: string, forMs: number): Effect.Effect<void>
}

/** The port: how areas spend and enforce rate limits, whatever owns the buckets. */
export class RateLimiter extends Context.Service<RateLimiter, {
  consume(owner: Owner, bucket: string, rule: Rule): Effect.Effect<Decision>
  /** One hit through this runner's leased slice of the bucket (`RateLimitBackend.consumeLeased`), without refusing. */
  consumeLeased(owner: Owner, bucket: string, rule: Rule): Effect.Effect<Decision>
  /** `RateLimitBackend.spendLeased`: a provider call paced by the bucket, counted until its answer. */
  spendLeased<A, E, R>(owner: Owner, bucket: string, rule: Rule, use: Effect.Effect<A, E, R>): Effect.Effect<A, E, R>
  /** `RateLimitBackend.pause`. */
  pause(owner: Owner, bucket: string, forMs: number): Effect.Effect<void>
  /** Consumes one hit and fails with 429 (+ `Retry-After`) when the bucket is full. */
  enforce(owner: Owner, bucket: string, rule: Rule): Effect.Effect<Decision, TooManyRequests>
  /** `enforce` through this runner's leased slice (`RateLimitBackend.consumeLeased`): for the per-request token limit. */
  enforceLeased(owner: Owner, bucket: string, rule: Rule): Effect.Effect<Decision, TooManyRequests>
  /**
   * Like `enforce`, over a durable log of the company (its hits survive a restart): one hit
   * for `subject`, allowed only when every rule, per subject or company-wide, has room.
   */
  enforceLogged(companyId: number, log: string, subject: string, rules: ReadonlyArray<LoggedRule>): Effect.Effect<Decision, TooManyRequests>
  /** The spec's heavy-route throttle (message search, around): per token, or per user for a session. */
  heavy(companyId: number, caller: { readonly tokenId: number | null; readonly userId: number }): Effect.Effect<Decision, TooManyRequests>
}>()("crm/platform/RateLimiter") {
  /** The limiter over a backend; `heavyPerMinute` is the configured heavy-route budget. */
  static readonly make = (backend: RateLimitBackend, heavyPerMinute: number) => {
    const heavyRule = { limit: heavyPerMinute, windowSeconds: 60 }
    const refuseWhenFull = Effect.fnUntraced(function*(decision: Decision) {
      if (!decision.allowed) {
        const retryAfter = Math.ceil(decision.retryAfterMs / 1000)
        yield* addResponseHeaders({ "retry-after": String(retryAfter) })
        return yield* tooManyRequests(retryAfter)
      }
      return decision
    })
    const enforce = (owner: Owner, bucket: string, rule: Rule) => Effect.flatMap(backend.consume(owner, bucket, rule), refuseWhenFull)
    const enforceLeased = (owner: Owner, bucket: string, rule: Rule) =>
      Effect.flatMap(backend.consumeLeased(owner, bucket, rule), refuseWhenFull)
    const enforceLogged = (companyId: number, log: string, subject: string, rules: ReadonlyArray<LoggedRule>) =>
      Effect.flatMap(backend.consumeLogged(companyId, log, subject, rules), refuseWhenFull)
    const heavy = (companyId: number, caller: { readonly tokenId: number | null; readonly userId: number }) =>
      enforce({ companyId }, caller.tokenId !== null ? `heavy:token:${caller.tokenId}` : `heavy:user:${caller.userId}`, heavyRule)
    return RateLimiter.of({
      consume: backend.consume,
      consumeLeased: backend.consumeLeased,
      spendLeased: backend.spendLeased,
      pause: backend.pause,
      enforce,
      enforceLeased,
      enforceLogged,
      heavy
    })
  }
}

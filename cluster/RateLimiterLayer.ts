import { Effect, Layer } from "effect"
import { AppConfig } from "../src/platform/Config.ts"
import { type LoggedRule, type Owner, RateLimiter, type Rule } from "../src/platform/RateLimiter.ts"
import { Company, Throttle } from "./Company.ts"

/** The rate limiter over the entities that own the buckets: a company's, or the global throttle keyed by bucket. */
export const RateLimiterLayer = Layer.effect(
  RateLimiter,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const companies = yield* Company.client
    const throttles = yield* Throttle.client
    return RateLimiter.make({
      consume: (owner: Owner, bucket: string, rule: Rule) => {
        const payload = { bucket, limit: rule.limit, windowMs: rule.windowSeconds * 1000 }
        const client = owner === "global" ? throttles(bucket) : companies(String(owner.companyId))
        return client.Consume(payload).pipe(Effect.orDie)
      },
      consumeLogged: (companyId: number, log: string, subject: string, rules: ReadonlyArray<LoggedRule>) =>
        companies(String(companyId)).ConsumeLogged({ log, subject, rules }).pipe(Effect.orDie)
    }, config.heavyRateLimitPerMinute)
  })
)

import { Clock, Deferred, Effect, Layer } from "effect"
import { AppConfig } from "../src/platform/Config.ts"
import { type LoggedRule, type Owner, RateLimiter, type Rule, windowMsOf } from "../src/platform/RateLimiter.ts"
import type { Decision, LeaseGrant } from "../src/platform/SlidingWindow.ts"
import { Company, Throttle } from "./Company.ts"

/** How long a runner may spend a slice; its unspent units go back within a sweep after that. */
const holdMs = 1_000
const sweepEveryMs = 250
const maxSlice = 100

interface Slice {
  readonly owner: Owner
  readonly bucket: string
  readonly lease: number
  /** Counted from before the Lease was sent, so it ends before the owner's hold does. */
  readonly expiresAt: number
  readonly leasedAt: number
  readonly remaining: number
  units: number
  /** When its last unit was spent, or for a unit held by `spendLeased`, when the work it paced ended. */
  lastSpentAt: number
  /** Units whose work (`spendLeased`) is still under way: the slice is handed back once they are done. */
  pending: number
  retired: boolean
}

/** The rate limiter over the entities that own the buckets: a company's, or the global throttle keyed by bucket. */
export const RateLimiterLayer = Layer.effect(
  RateLimiter,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const companies = yield* Company.client
    const throttles = yield* Throttle.client
    const clientOf = (owner: Owner, bucket: string) =>
      owner === "global" ? throttles(bucket) : companies(String(owner.companyId))
    const keyOf = (owner: Owner, bucket: string) => owner === "global" ? `g|${bucket}` : `${owner.companyId}|${bucket}`

    // This runner's slices, the Lease in flight per bucket (callers wait for it rather than ask
    // again) and how big a slice to ask for: doubled when one ran out early, halved when units
    // came back, so a quiet token gets slices of one and exact headers.
    const slices = new Map<string, Slice>()
    const inFlight = new Map<string, Deferred.Deferred<LeaseGrant>>()
    const wants = new Map<string, number>()
    // Buckets a throttle answer paused on this runner, until when: no unit of a slice held here is spent meanwhile.
    const pausedUntil = new Map<string, number>()

    // Every slice is settled, spent or not: the owner then counts its units from their last spend
    // rather than from the end of the hold, so the window slides as it would hit by hit.
    const release = (slice: Slice) =>
      Effect.forkDetach(
        clientOf(slice.owner, slice.bucket).Release({
          bucket: slice.bucket,
          lease: slice.lease,
          units: slice.units,
          spentWithinMs: Math.min(holdMs, slice.lastSpentAt - slice.leasedAt)
        }).pipe(
          Effect.catchCause((cause) => Effect.logDebug("rate-limit slice not handed back; it expires with its window", cause))
        )
      ).pipe(Effect.asVoid)

    const retire = (key: string, slice: Slice, now: number) => {
      if (slices.get(key) === slice) slices.delete(key)
      if (slice.retired) return Effect.void
      slice.retired = true
      const want = wants.get(key) ?? 4
      if (slice.units > 0) wants.set(key, Math.max(1, Math.floor(want / 2)))
      else if (now - slice.leasedAt < holdMs / 2) wants.set(key, Math.min(maxSlice, want * 2))
      return slice.pending === 0 ? release(slice) : Effect.void
    }

    /** A unit's work ended: it counts from now, and a retired slice whose units are all done goes back. */
    const settle = (slice: Slice) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        slice.pending -= 1
        slice.lastSpentAt = Math.max(slice.lastSpentAt, now)
        return slice.retired && slice.pending === 0 ? release(slice) : Effect.void
      })

    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      yield* Effect.sleep(sweepEveryMs)
      const now = yield* Clock.currentTimeMillis
      for (const [key, slice] of slices) if (slice.expiresAt <= now) yield* retire(key, slice, now)
      if (wants.size > 100_000) wants.clear()
      for (const [key, until] of pausedUntil) if (until <= now) pausedUntil.delete(key)
    })))

    const lease = (key: string, owner: Owner, bucket: string, rule: Rule) =>
      Effect.gen(function*() {
        const deferred = yield* Deferred.make<LeaseGrant>()
        inFlight.set(key, deferred)
        const sentAt = yield* Clock.currentTimeMillis
        const payload = { bucket, limit: rule.limit, windowMs: windowMsOf(rule), holdMs, want: wants.get(key) ?? 4 }
        // Detached: a caller that goes away must not leave the others waiting on an interrupted Lease.
        yield* Effect.forkDetach(clientOf(owner, bucket).Lease(payload).pipe(
          Effect.orDie,
          Effect.tap((grant) =>
            Effect.sync(() => {
              if (grant.granted > 0) {
                slices.set(key, {
                  owner,
                  bucket,
                  lease: grant.lease,
                  expiresAt: sentAt + holdMs,
                  leasedAt: sentAt,
                  remaining: grant.remaining,
                  units: grant.granted,
                  lastSpentAt: sentAt,
                  pending: 0,
                  retired: false
                })
              }
            })
          ),
          Effect.onExit((exit) =>
            Effect.andThen(Effect.sync(() => inFlight.delete(key)), Deferred.done(deferred, exit))
          )
        ))
        return deferred
      })

    /**
     * One unit of this runner's slice of the bucket, leasing a new slice when it has none: the slice it
     * came from. A `held` unit is pending until its work settles, so the slice is not handed back before.
     */
    const take = (owner: Owner, bucket: string, rule: Rule, held: boolean): Effect.Effect<{ readonly decision: Decision; readonly slice?: Slice }> =>
      Effect.gen(function*() {
        const key = keyOf(owner, bucket)
        while (true) {
          const now = yield* Clock.currentTimeMillis
          const until = pausedUntil.get(key) ?? 0
          if (until > now) return { decision: { allowed: false, remaining: 0, retryAfterMs: until - now } }
          const slice = slices.get(key)
          if (slice !== undefined) {
            if (slice.units > 0 && slice.expiresAt > now) {
              slice.units -= 1
              slice.lastSpentAt = now
              if (held) slice.pending += 1
              if (slice.units === 0) yield* retire(key, slice, now)
              return { decision: { allowed: true, remaining: slice.remaining + slice.units, retryAfterMs: 0 }, slice }
            }
            yield* retire(key, slice, now)
          }
          const grant = yield* Deferred.await(inFlight.get(key) ?? (yield* lease(key, owner, bucket, rule)))
          if (grant.granted === 0) return { decision: { allowed: false, remaining: 0, retryAfterMs: grant.retryAfterMs } }
        }
      })

    const consumeLeased = (owner: Owner, bucket: string, rule: Rule): Effect.Effect<Decision> =>
      Effect.map(take(owner, bucket, rule, false), (taken) => taken.decision)

    const spendLeased = <A, E, R>(owner: Owner, bucket: string, rule: Rule, use: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.flatMap(take(owner, bucket, rule, true), ({ decision, slice }) =>
        decision.allowed && slice !== undefined
          ? Effect.ensuring(use, settle(slice))
          : Effect.andThen(Effect.sleep(decision.retryAfterMs), spendLeased(owner, bucket, rule, use)))

    const pause = (owner: Owner, bucket: string, forMs: number): Effect.Effect<void> =>
      Effect.gen(function*() {
        const key = keyOf(owner, bucket)
        const now = yield* Clock.currentTimeMillis
        pausedUntil.set(key, Math.max(pausedUntil.get(key) ?? 0, now + forMs))
        const slice = slices.get(key)
        if (slice !== undefined) yield* retire(key, slice, now)
        yield* clientOf(owner, bucket).Pause({ bucket, forMs }).pipe(
          Effect.catchCause((cause) => Effect.logWarning("bucket pause not recorded by its owner; this runner keeps to it", cause))
        )
      })

    return RateLimiter.make({
      consume: (owner: Owner, bucket: string, rule: Rule) => {
        const payload = { bucket, limit: rule.limit, windowMs: windowMsOf(rule) }
        return clientOf(owner, bucket).Consume(payload).pipe(Effect.orDie)
      },
      consumeLeased,
      spendLeased,
      pause,
      consumeLogged: (companyId: number, log: string, subject: string, rules: ReadonlyArray<LoggedRule>) =>
        companies(String(companyId)).ConsumeLogged({ log, subject, rules }).pipe(Effect.orDie)
    }, config.heavyRateLimitPerMinute)
  })
)

import { Schema } from "effect"
import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { LoggedRule } from "../src/platform/RateLimiter.ts"

export const Consume = Rpc.make("Consume", {
  payload: {
    bucket: Schema.String,
    limit: Schema.Int,
    windowMs: Schema.Int
  },
  success: Schema.Struct({
    allowed: Schema.Boolean,
    remaining: Schema.Int,
    retryAfterMs: Schema.Int
  })
})

/**
 * A slice of a bucket's budget for a runner to spend locally for `holdMs`: its units count as
 * used from now on, so whatever the runners do with their slices the limit holds.
 */
export const Lease = Rpc.make("Lease", {
  payload: {
    bucket: Schema.String,
    limit: Schema.Int,
    windowMs: Schema.Int,
    holdMs: Schema.Int,
    want: Schema.Int
  },
  success: Schema.Struct({
    granted: Schema.Int,
    remaining: Schema.Int,
    retryAfterMs: Schema.Int,
    lease: Schema.Int
  })
})

/** Settles a slice when it runs out or its hold ends: the unspent units, and how soon after the lease the last one was spent. */
export const Release = Rpc.make("Release", {
  payload: {
    bucket: Schema.String,
    lease: Schema.Int,
    units: Schema.Int,
    spentWithinMs: Schema.Int
  }
})

/** Grants no slice of the bucket for `forMs` from now: a provider answered that it is over its limit. */
export const Pause = Rpc.make("Pause", {
  payload: {
    bucket: Schema.String,
    forMs: Schema.Int
  }
})

/**
 * One hit on a log whose hits survive a restart (contact block changes): allowed only when every
 * rule has room, and then appended to the log's table before the answer.
 */
export const ConsumeLogged = Rpc.make("ConsumeLogged", {
  payload: {
    log: Schema.String,
    subject: Schema.String,
    rules: Schema.Array(LoggedRule)
  },
  success: Schema.Struct({
    allowed: Schema.Boolean,
    remaining: Schema.Int,
    retryAfterMs: Schema.Int
  })
})

/** One per company: owns the per-token rate-limit buckets and the company's other throttles. */
export const Company = Entity.make("Company", [Consume, ConsumeLogged, Lease, Release, Pause])

/** Throttles that belong to no company (login per e-mail and IP, signed media per IP), keyed by bucket. */
export const Throttle = Entity.make("Throttle", [Consume, Lease, Release, Pause])

import { Schema } from "effect"
import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"

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

/** One per company: owns the per-token rate-limit buckets and the company's other throttles. */
export const Company = Entity.make("Company", [Consume])

/** Throttles that belong to no company (login per e-mail and IP, signed media per IP), keyed by bucket. */
export const Throttle = Entity.make("Throttle", [Consume])

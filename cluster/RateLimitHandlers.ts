import { Clock, Effect, Layer } from "effect"
import { SlidingLogs } from "../src/platform/SlidingWindow.ts"
import { Company, Throttle } from "./RateLimit.ts"

const consumeWith = (logs: SlidingLogs) =>
({ payload }: { readonly payload: { readonly bucket: string; readonly limit: number; readonly windowMs: number } }) =>
  Effect.map(Clock.currentTimeMillis, (now) => logs.consume(payload.bucket, now, payload.limit, payload.windowMs))

export const CompanyLayer = Company.toLayer(
  Effect.sync(() => Company.of({ Consume: consumeWith(new SlidingLogs()) })),
  { maxIdleTime: "15 minutes" }
)

export const ThrottleLayer = Throttle.toLayer(
  Effect.sync(() => Throttle.of({ Consume: consumeWith(new SlidingLogs()) })),
  { maxIdleTime: "20 minutes" }
)

export const RateLimitEntities = Layer.mergeAll(CompanyLayer, ThrottleLayer)

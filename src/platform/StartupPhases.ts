import { Clock, Effect, Layer } from "effect"

/**
 * `layer`, logging one `startup phase` line with its name and the milliseconds its build took, so an
 * operator sees where a slow start goes. Phases built side by side overlap.
 */
export const phase = <A, E, R>(name: string, layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  Layer.unwrap(Effect.map(Clock.currentTimeMillis, (start) =>
    Layer.tap(layer, () =>
      Effect.flatMap(Clock.currentTimeMillis, (end) =>
        Effect.logInfo("startup phase").pipe(Effect.annotateLogs({ phase: name, ms: end - start }))))
  ))

/**
 * Milliseconds from the process's start to now: what loading the modules took when read before any
 * layer is built.
 */
export const sinceProcessStart = Effect.map(Clock.currentTimeMillis, (now) => Math.round(now - performance.timeOrigin))

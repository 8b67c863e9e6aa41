import { Clock, Effect, Layer } from "effect"

/**
 * `layer`, logging one `startup phase: <name>` line with the milliseconds its build took (`ms`), so an
 * operator sees where a slow start goes. Phases built side by side overlap. The name is in the text, not
 * only a field: the logger folds repeats of one text within a second.
 */
export const phase = <A, E, R>(name: string, layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  Layer.unwrap(Effect.map(Clock.currentTimeMillis, (start) =>
    Layer.tap(layer, () =>
      Effect.flatMap(Clock.currentTimeMillis, (end) =>
        Effect.logInfo(`startup phase: ${name}`).pipe(Effect.annotateLogs({ phase: name, ms: end - start }))))
  ))

/**
 * Milliseconds from the process's start to now: what loading the modules took when read before any
 * layer is built.
 */
export const sinceProcessStart = Effect.map(Clock.currentTimeMillis, (now) => Math.round(now - performance.timeOrigin))

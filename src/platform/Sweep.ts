import { type Duration, Effect, Layer } from "effect"

/**
 * A durable timer's loop: `sweep` (which claims what is due from its table) at start, then every
 * `interval`; a failed sweep is logged and the next one retries.
 */
export const sweepEvery = <E, R>(what: string, sweep: Effect.Effect<unknown, E, R>, interval: Duration.Input) =>
  Layer.effectDiscard(Effect.forkScoped(Effect.forever(
    sweep.pipe(
      Effect.catchCause((cause) => Effect.logWarning(`${what} sweep failed`, cause)),
      Effect.andThen(Effect.sleep(interval))
    )
  )))

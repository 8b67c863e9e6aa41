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

/** Runs `step` (which handles at most `size` items and answers how many) until a step finds fewer; answers the total. */
export const inBatches = <E, R>(size: number, step: Effect.Effect<number, E, R>): Effect.Effect<number, E, R> =>
  Effect.flatMap(step, (done) => done < size ? Effect.succeed(done) : Effect.map(inBatches(size, step), (rest) => done + rest))

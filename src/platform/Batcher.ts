import { Cause, type Context, Deferred, Effect, Exit, type Scope } from "effect"

/**
 * Calls of one key coalesced into batches: a call made while none of its key is under way runs at
 * once, alone, in the caller's fiber; the calls made while a batch runs wait, and go together as the
 * next batch (at most `max`) as soon as it ends. So an idle call costs what a direct one does, and under
 * load the number of batches follows the capacity of what runs them, not the rate of calls. A call
 * interrupted while it waits is still run with its batch.
 */
export interface Batcher<I, O> {
  submit(item: I): Effect.Effect<O>
}

interface Waiting<I, O> {
  readonly item: I
  readonly done: Deferred.Deferred<O>
}

export const makeBatcher = <I, O>(options: {
  /** Calls of different keys never share a batch (the company, the actor a batch acts as, …). */
  readonly key: (item: I) => string
  /** One result per item, in the items' order. A failure or defect ends each of the batch's calls with it. */
  readonly run: (key: string, items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<O>>
  readonly max: number
}): Effect.Effect<Batcher<I, O>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    // A batch runs in the context the batcher was made in, never in the context of the call that
    // started it: that call may be inside a transaction its batch must not join.
    const context = yield* Effect.context<never>()
    const isolated = <A>(effect: Effect.Effect<A>) => Effect.updateContext(effect, (_: Context.Context<never>) => context)
    /** The calls waiting for the batch under way of each key; a key is absent when none is under way. */
    const queues = new Map<string, Array<Waiting<I, O>>>()

    const runAll = (key: string, items: ReadonlyArray<I>) =>
      Effect.flatMap(isolated(options.run(key, items)), (results) =>
        results.length === items.length ? Effect.succeed(results) : Effect.die(new Error(`A batch of ${items.length} answered ${results.length} results.`)))

    const drain = (key: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const queue = queues.get(key)!
        if (queue.length === 0) {
          queues.delete(key)
          return Effect.void
        }
        const batch = queue.splice(0, options.max)
        return runAll(key, batch.map((w) => w.item)).pipe(
          Effect.exit,
          Effect.flatMap((exit) =>
            Effect.sync(() => {
              batch.forEach((w, i) =>
                Deferred.doneUnsafe(w.done, Exit.isSuccess(exit) ? Exit.succeed(exit.value[i]) : Exit.failCause(exit.cause as Cause.Cause<never>)))
            })
          ),
          Effect.andThen(drain(key))
        )
      })

    // Whoever ends a batch hands what queued meanwhile to a fiber of the batcher's own.
    const handOff = (key: string) => Effect.forkIn(isolated(drain(key)), scope)

    const submit = (item: I): Effect.Effect<O> =>
      Effect.suspend(() => {
        const key = options.key(item)
        const queue = queues.get(key)
        if (queue !== undefined) {
          const done = Deferred.makeUnsafe<O>()
          queue.push({ item, done })
          return Deferred.await(done)
        }
        queues.set(key, [])
        return runAll(key, [item]).pipe(
          Effect.map((results) => results[0]),
          Effect.ensuring(Effect.asVoid(handOff(key)))
        )
      })

    return { submit }
  })

/**
 * `makeBatcher` for reads by id: a batch reads each of its distinct ids once (`read`, given the batch's
 * first item for what its key stands for), and each call gets what its id found, or undefined.
 */
export const makeReadBatcher = <I, O>(options: {
  readonly key: (item: I) => string
  readonly id: (item: I) => number
  readonly read: (first: I, ids: ReadonlyArray<number>) => Effect.Effect<ReadonlyMap<number, O>>
  readonly max: number
}): Effect.Effect<Batcher<I, O | undefined>, never, Scope.Scope> =>
  makeBatcher<I, O | undefined>({
    key: options.key,
    max: options.max,
    run: (_, items) =>
      Effect.map(options.read(items[0], [...new Set(items.map(options.id))]), (found) => items.map((item) => found.get(options.id(item))))
  })

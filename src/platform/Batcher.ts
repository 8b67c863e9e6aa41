import { Cause, type Context, Deferred, Effect, Exit, type Scope } from "effect"

/**
 * Calls of one key coalesced into batches: a call waits for the batch that takes it, and a batch of a
 * key starts when the previous one has ended, with every call made meanwhile (at most `max`). Idle,
 * a call goes alone after one turn of the scheduler; under load each batch takes what queued while
 * the last one ran, so the number of batches follows the capacity of what runs them, not the rate of
 * calls. A call interrupted while it waits is still run with its batch.
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
    const queues = new Map<string, Array<Waiting<I, O>>>()

    const drain = (key: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const queue = queues.get(key)!
        if (queue.length === 0) {
          queues.delete(key)
          return Effect.void
        }
        const batch = queue.splice(0, options.max)
        return options.run(key, batch.map((w) => w.item)).pipe(
          Effect.exit,
          Effect.flatMap((exit) =>
            Effect.sync(() => {
              if (Exit.isSuccess(exit) && exit.value.length === batch.length) {
                batch.forEach((w, i) => Deferred.doneUnsafe(w.done, Exit.succeed(exit.value[i])))
              } else {
                const cause = Exit.isFailure(exit) ? exit.cause : Cause.die(new Error(`A batch of ${batch.length} answered ${Exit.isSuccess(exit) ? exit.value.length : 0} results.`))
                for (const w of batch) Deferred.doneUnsafe(w.done, Exit.failCause(cause) as Exit.Exit<O>)
              }
            })
          ),
          Effect.andThen(drain(key))
        )
      })

    const submit = (item: I): Effect.Effect<O> =>
      Effect.suspend(() => {
        const key = options.key(item)
        const done = Deferred.makeUnsafe<O>()
        const queue = queues.get(key)
        if (queue !== undefined) {
          queue.push({ item, done })
          return Deferred.await(done)
        }
        queues.set(key, [{ item, done }])
        return Effect.andThen(Effect.forkIn(Effect.updateContext(drain(key), (_: Context.Context<never>) => context), scope), Deferred.await(done))
      })

    return { submit }
  })

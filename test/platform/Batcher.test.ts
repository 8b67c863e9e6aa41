import { assert, describe, it } from "vitest"
import { Context, Deferred, Effect, Exit, Fiber, Option } from "effect"
import { makeBatcher } from "../../src/platform/Batcher.ts"

/** A batcher whose batches are recorded, each held until the test lets it go (`gate`). */
const recorded = (options: { readonly max?: number; readonly failOn?: number } = {}) =>
  Effect.gen(function*() {
    const batches: Array<{ key: string; items: ReadonlyArray<number> }> = []
    const gates: Array<Deferred.Deferred<void>> = []
    const batcher = yield* makeBatcher<number, string>({
      key: (n) => (n < 100 ? "low" : "high"),
      max: options.max ?? 100,
      run: (key, items) =>
        Effect.gen(function*() {
          batches.push({ key, items })
          const gate = Deferred.makeUnsafe<void>()
          gates.push(gate)
          yield* Deferred.await(gate)
          if (options.failOn !== undefined && items.includes(options.failOn)) return yield* Effect.die(new Error("boom"))
          return items.map((n) => `${key}:${n}`)
        })
    })
    const open = (i: number) => Effect.suspend(() => Deferred.succeed(gates[i], undefined))
    return { batcher, batches, open }
  })

const settle = Effect.gen(function*() {
  for (let i = 0; i < 5; i++) yield* Effect.yieldNow
})

describe("Batcher", () => {
  it("runs the calls of one turn as one batch, and the calls made while it runs as the next", () =>
    Effect.gen(function*() {
      const { batcher, batches, open } = yield* recorded()
      const first = yield* Effect.forkChild(Effect.all([1, 2, 3].map((n) => batcher.submit(n)), { concurrency: "unbounded" }))
      yield* settle
      assert.deepStrictEqual(batches.map((b) => b.items), [[1, 2, 3]])
      const second = yield* Effect.forkChild(Effect.all([4, 5].map((n) => batcher.submit(n)), { concurrency: "unbounded" }))
      yield* settle
      // The second batch waits for the first to end.
      assert.strictEqual(batches.length, 1)
      yield* open(0)
      assert.deepStrictEqual(yield* Fiber.join(first), ["low:1", "low:2", "low:3"])
      yield* settle
      assert.deepStrictEqual(batches.map((b) => b.items), [[1, 2, 3], [4, 5]])
      yield* open(1)
      assert.deepStrictEqual(yield* Fiber.join(second), ["low:4", "low:5"])
    }).pipe(Effect.scoped, Effect.runPromise))

  it("keeps keys apart, each with its own batch in flight", () =>
    Effect.gen(function*() {
      const { batcher, batches, open } = yield* recorded()
      const calls = yield* Effect.forkChild(Effect.all([1, 101, 2, 102].map((n) => batcher.submit(n)), { concurrency: "unbounded" }))
      yield* settle
      assert.deepStrictEqual(batches.map((b) => [b.key, b.items]), [["low", [1, 2]], ["high", [101, 102]]])
      yield* open(1)
      yield* open(0)
      assert.deepStrictEqual(yield* Fiber.join(calls), ["low:1", "high:101", "low:2", "high:102"])
    }).pipe(Effect.scoped, Effect.runPromise))

  it("takes at most `max` calls per batch", () =>
    Effect.gen(function*() {
      const { batcher, batches, open } = yield* recorded({ max: 2 })
      const calls = yield* Effect.forkChild(Effect.all([1, 2, 3, 4, 5].map((n) => batcher.submit(n)), { concurrency: "unbounded" }))
      yield* settle
      yield* open(0)
      yield* settle
      yield* open(1)
      yield* settle
      yield* open(2)
      assert.deepStrictEqual(yield* Fiber.join(calls), ["low:1", "low:2", "low:3", "low:4", "low:5"])
      assert.deepStrictEqual(batches.map((b) => b.items), [[1, 2], [3, 4], [5]])
    }).pipe(Effect.scoped, Effect.runPromise))

  it("ends each call of a batch that died with its defect, and the next batch still runs", () =>
    Effect.gen(function*() {
      const { batcher, open } = yield* recorded({ failOn: 2 })
      const failing = yield* Effect.forkChild(Effect.all([1, 2].map((n) => Effect.exit(batcher.submit(n))), { concurrency: "unbounded" }))
      yield* settle
      const later = yield* Effect.forkChild(batcher.submit(3))
      yield* open(0)
      const exits = yield* Fiber.join(failing)
      assert.isTrue(exits.every((e) => Exit.isFailure(e) && String(Exit.isFailure(e) ? e.cause : "").includes("boom")))
      yield* settle
      yield* open(1)
      assert.strictEqual(yield* Fiber.join(later), "low:3")
    }).pipe(Effect.scoped, Effect.runPromise))

  it("goes alone when idle", () =>
    Effect.gen(function*() {
      const { batcher, batches, open } = yield* recorded()
      const one = yield* Effect.forkChild(batcher.submit(7))
      yield* settle
      yield* open(0)
      assert.strictEqual(yield* Fiber.join(one), "low:7")
      const two = yield* Effect.forkChild(batcher.submit(8))
      yield* settle
      yield* open(1)
      assert.strictEqual(yield* Fiber.join(two), "low:8")
      assert.deepStrictEqual(batches.map((b) => b.items), [[7], [8]])
    }).pipe(Effect.scoped, Effect.runPromise))

  it("runs a batch in the batcher's own context, not in that of the call that started it (a transaction)", () =>
    Effect.gen(function*() {
      const Transaction = Context.Service<{ readonly id: string }>("test/Transaction")
      const seen: Array<Option.Option<{ readonly id: string }>> = []
      const batcher = yield* makeBatcher<number, number>({
        key: () => "k",
        max: 10,
        run: (_, items) => Effect.map(Effect.serviceOption(Transaction), (tx) => {
          seen.push(tx)
          return items
        })
      })
      assert.strictEqual(yield* batcher.submit(1).pipe(Effect.provideService(Transaction, { id: "caller's" })), 1)
      assert.deepStrictEqual(seen, [Option.none()])
    }).pipe(Effect.scoped, Effect.runPromise))
})

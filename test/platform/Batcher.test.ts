import { assert, describe, it } from "vitest"
import { Context, Deferred, Effect, Exit, Fiber, Option } from "effect"
import { makeBatcher, makeReadBatcher } from "../../src/platform/Batcher.ts"

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
  it("runs a call at once when its key is idle, and the calls made while it runs together as the next batch", () =>
    Effect.gen(function*() {
      const { batcher, batches, open } = yield* recorded()
      const first = yield* Effect.forkChild(Effect.all([1, 2, 3].map((n) => batcher.submit(n)), { concurrency: "unbounded" }))
      yield* settle
      assert.deepStrictEqual(batches.map((b) => b.items), [[1]])
      const second = yield* Effect.forkChild(Effect.all([4, 5].map((n) => batcher.submit(n)), { concurrency: "unbounded" }))
      yield* settle
      // The queued calls wait for the batch under way to end.
      assert.strictEqual(batches.length, 1)
      yield* open(0)
      yield* settle
      assert.deepStrictEqual(batches.map((b) => b.items), [[1], [2, 3, 4, 5]])
      yield* open(1)
      assert.deepStrictEqual(yield* Fiber.join(first), ["low:1", "low:2", "low:3"])
      assert.deepStrictEqual(yield* Fiber.join(second), ["low:4", "low:5"])
    }).pipe(Effect.scoped, Effect.runPromise))

  it("keeps keys apart, each with its own batch under way", () =>
    Effect.gen(function*() {
      const { batcher, batches, open } = yield* recorded()
      const calls = yield* Effect.forkChild(Effect.all([1, 101, 2, 102].map((n) => batcher.submit(n)), { concurrency: "unbounded" }))
      yield* settle
      assert.deepStrictEqual(batches.map((b) => [b.key, b.items]), [["low", [1]], ["high", [101]]])
      yield* open(1)
      yield* settle
      assert.deepStrictEqual(batches.map((b) => [b.key, b.items]), [["low", [1]], ["high", [101]], ["high", [102]]])
      yield* open(0)
      yield* settle
      yield* open(2)
      yield* open(3)
      assert.deepStrictEqual(yield* Fiber.join(calls), ["low:1", "high:101", "low:2", "high:102"])
      assert.deepStrictEqual(batches.map((b) => [b.key, b.items]), [["low", [1]], ["high", [101]], ["high", [102]], ["low", [2]]])
    }).pipe(Effect.scoped, Effect.runPromise))

  it("takes at most `max` calls per batch", () =>
    Effect.gen(function*() {
      const { batcher, batches, open } = yield* recorded({ max: 2 })
      const calls = yield* Effect.forkChild(Effect.all([1, 2, 3, 4, 5].map((n) => batcher.submit(n)), { concurrency: "unbounded" }))
      for (let i = 0; i < 3; i++) {
        yield* settle
        yield* open(i)
      }
      assert.deepStrictEqual(yield* Fiber.join(calls), ["low:1", "low:2", "low:3", "low:4", "low:5"])
      assert.deepStrictEqual(batches.map((b) => b.items), [[1], [2, 3], [4, 5]])
    }).pipe(Effect.scoped, Effect.runPromise))

  it("ends each call of a batch that died with its defect, and the next batch still runs", () =>
    Effect.gen(function*() {
      const { batcher, batches, open } = yield* recorded({ failOn: 2 })
      const calls = yield* Effect.forkChild(Effect.all([1, 2, 3].map((n) => Effect.exit(batcher.submit(n))), { concurrency: "unbounded" }))
      yield* settle
      yield* open(0)
      yield* settle
      const later = yield* Effect.forkChild(batcher.submit(4))
      yield* settle
      yield* open(1)
      const exits = yield* Fiber.join(calls)
      assert.isTrue(Exit.isSuccess(exits[0]))
      assert.isTrue(exits.slice(1).every((e) => Exit.isFailure(e) && String(e.cause).includes("boom")))
      yield* settle
      yield* open(2)
      assert.strictEqual(yield* Fiber.join(later), "low:4")
      assert.deepStrictEqual(batches.map((b) => b.items), [[1], [2, 3], [4]])
    }).pipe(Effect.scoped, Effect.runPromise))

  it("hands the calls that queued to the next batch even when the call under way is interrupted", () =>
    Effect.gen(function*() {
      const { batcher, batches, open } = yield* recorded()
      const first = yield* Effect.forkChild(batcher.submit(1))
      yield* settle
      const queued = yield* Effect.forkChild(batcher.submit(2))
      yield* settle
      yield* Fiber.interrupt(first)
      yield* settle
      assert.deepStrictEqual(batches.map((b) => b.items), [[1], [2]])
      yield* open(1)
      assert.strictEqual(yield* Fiber.join(queued), "low:2")
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

  it("reads each distinct id of a batch once, and answers each call with what its id found", () =>
    Effect.gen(function*() {
      const reads: Array<ReadonlyArray<number>> = []
      const gate = Deferred.makeUnsafe<void>()
      const reader = yield* makeReadBatcher<{ readonly key: string; readonly id: number }, string>({
        key: (item) => item.key,
        id: (item) => item.id,
        max: 100,
        read: (first, ids) =>
          Effect.gen(function*() {
            reads.push(ids)
            if (reads.length === 1) yield* Deferred.await(gate)
            // Odd ids exist; even ones do not.
            return new Map(ids.filter((id) => id % 2 === 1).map((id) => [id, `${first.key}:${id}`]))
          })
      })
      const first = yield* Effect.forkChild(reader.submit({ key: "c", id: 1 }))
      yield* settle
      const rest = yield* Effect.forkChild(Effect.all([3, 2, 3, 5].map((id) => reader.submit({ key: "c", id })), { concurrency: "unbounded" }))
      yield* settle
      yield* Deferred.succeed(gate, undefined)
      assert.strictEqual(yield* Fiber.join(first), "c:1")
      assert.deepStrictEqual(yield* Fiber.join(rest), ["c:3", undefined, "c:3", "c:5"])
      assert.deepStrictEqual(reads, [[1], [3, 2, 5]])
    }).pipe(Effect.scoped, Effect.runPromise))
})

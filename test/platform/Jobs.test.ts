import { assert, describe, layer } from "@effect/vitest"
import { DateTime, Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Schema, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../../src/platform/Config.ts"
import { type JobHandler, jobHandler, type JobKind, jobKind, Jobs, type JobRun } from "../../src/platform/Jobs.ts"
import { MigrationsLayer } from "../../src/platform/Migrations.ts"
import { SqlLayer } from "../../src/platform/Sql.ts"

/**
 * The runner against a real database (PostgreSQL from DATABASE_URL, else PGlite), with time from
 * TestClock: leases, retries and `run_after` are read from `Clock`, so the tests move time instead
 * of waiting for it. Every test declares kinds of its own, so no other runner touches its jobs.
 */
const Database = MigrationsLayer.pipe(
  Layer.provideMerge(SqlLayer),
  Layer.provide(AppConfig.layerWith(process.env.DATABASE_URL ? {} : { dataDir: "memory://" }))
)

const Payload = Schema.Struct({ n: Schema.Int })
const Progress = Schema.Struct({ done: Schema.Int })

const uniqueKind = (name: string, options: Omit<Parameters<typeof jobKind>[1], "payload" | "progress"> = {}) =>
  jobKind(`test.${name}.${randomUUID().slice(0, 8)}`, { payload: Payload, progress: Progress, ...options })

type Run = JobRun<typeof Payload.Type, typeof Progress.Type>

const handler = (kind: JobKind<typeof Payload.Type, typeof Progress.Type>, handle: (job: Run) => Effect.Effect<void, unknown>) =>
  jobHandler(kind, Effect.succeed(handle))

/** Real time for the database to answer while TestClock stands still. */
const settle = TestClock.withLive(Effect.sleep("150 millis"))

const eventually = <A>(check: Effect.Effect<A | undefined, unknown, SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      const found = yield* check
      if (found !== undefined) return found
      yield* TestClock.withLive(Effect.sleep("25 millis"))
    }
    return yield* Effect.die("condition never met")
  })

/**
 * Moves the clock in steps until `check` holds, failing once `within` has passed: asserts "by then"
 * without depending on how fast the database answers between steps.
 */
const advanceUntil = <A>(check: Effect.Effect<A | undefined, unknown, SqlClient.SqlClient>, step: Duration.Input, within: Duration.Input) =>
  Effect.gen(function*() {
    let moved = Duration.zero
    while (true) {
      const found = yield* check
      if (found !== undefined) return found
      if (Duration.isGreaterThanOrEqualTo(moved, Duration.fromInputUnsafe(within))) return yield* Effect.die(`not met within ${Duration.format(moved)}`)
      yield* TestClock.adjust(step)
      moved = Duration.sum(moved, Duration.fromInputUnsafe(step))
      yield* settle
    }
  })

const isStatus = (id: number, status: string) => Effect.map(jobState(id), (s) => (s.status === status ? s : undefined))

const startRunner = (handlers: ReadonlyArray<JobHandler<never>>, drain: Duration.Input = "200 millis") =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    yield* Layer.buildWithScope(Jobs.runner(handlers, { drain }), scope)
    return scope
  })

const newCompany = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ id: number }>`INSERT INTO companies (name) VALUES ('jobs test') RETURNING id`
  return rows[0].id
})

interface JobState {
  readonly status: string
  readonly attempts: number
  readonly lease_owner: string | null
  readonly progress: unknown
  readonly result: unknown
  readonly error: string | null
}

const jobState = (id: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<JobState>`SELECT status, attempts, lease_owner, progress, result, error FROM jobs WHERE id = ${id}`
    return rows[0]
  })

const whenStatus = (id: number, status: string) => eventually(Effect.map(jobState(id), (s) => (s.status === status ? s : undefined)))

const statuses = (kind: JobKind<any, any>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ status: string }>`SELECT status FROM jobs WHERE kind = ${kind.name} ORDER BY id`
    return rows.map((r) => r.status)
  })

layer(Database, { timeout: "120 seconds" })("Jobs", (it) => {
  describe("leases", () => {
    it.effect("a job whose lease ran out is adopted under another owner, and the late runner's checkpoint is refused", () =>
      Effect.gen(function*() {
        const jobs = yield* Jobs
        const companyId = yield* newCompany
        // Concurrency 1: the stuck runner is full, so only the second runner can adopt.
        const kind = uniqueKind("lease", { lease: "60 seconds", concurrency: 1 })
        const gate = yield* Deferred.make<void>()
        const lateCheckpoint = yield* Deferred.make<Exit.Exit<void, unknown>>()
        const first = yield* startRunner([handler(kind, (job) =>
          Effect.gen(function*() {
            yield* Deferred.await(gate)
            yield* Deferred.succeed(lateCheckpoint, yield* Effect.exit(job.advance({ done: 1 })))
          }))])
        const id = yield* jobs.enqueue(kind, companyId, { n: 1 })
        const claimed = yield* whenStatus(id, "running")
        assert.strictEqual(claimed.attempts, 1)

        const adopted: Array<number> = []
        const second = yield* startRunner([handler(kind, (job) =>
          Effect.gen(function*() {
            adopted.push(job.attempt)
            yield* job.complete({ by: "second" })
          }))])
        // Inside the lease: nobody adopts.
        yield* TestClock.adjust("59 seconds")
        yield* settle
        assert.deepStrictEqual([adopted, (yield* jobState(id)).lease_owner], [[], claimed.lease_owner])

        // The next adoption round after the lease ran out.
        const done = yield* advanceUntil(isStatus(id, "finished"), "5 seconds", "35 seconds")
        assert.deepStrictEqual(adopted, [2])
        assert.deepStrictEqual([done.attempts, done.result, done.lease_owner], [2, { by: "second" }, null])

        yield* Deferred.succeed(gate, undefined)
        const late = yield* Deferred.await(lateCheckpoint)
        assert.isTrue(Exit.isFailure(late))
        assert.strictEqual(JSON.stringify(late).includes("JobLeaseLost"), true)
        assert.deepStrictEqual((yield* jobState(id)).progress, null)
        yield* Scope.close(first, Exit.void)
        yield* Scope.close(second, Exit.void)
      }).pipe(Effect.provide(Jobs.layer)))

    it.effect("at shutdown stops claiming and lets a running job finish within the drain time", () =>
      Effect.gen(function*() {
        const jobs = yield* Jobs
        const companyId = yield* newCompany
        const kind = uniqueKind("drain")
        const started = yield* Deferred.make<void>()
        const gate = yield* Deferred.make<void>()
        const first = yield* startRunner([handler(kind, (job) =>
          Effect.gen(function*() {
            yield* Deferred.succeed(started, undefined)
            yield* Deferred.await(gate)
            yield* job.complete({ finished: true })
          }))], "20 seconds")
        const id = yield* jobs.enqueue(kind, companyId, { n: 1 })
        yield* Deferred.await(started)
        const closing = yield* Effect.forkChild(Scope.close(first, Exit.void))
        yield* settle
        // Queued after the stop began: not claimed by the stopping runner.
        const later = yield* jobs.enqueue(kind, companyId, { n: 2 })
        yield* settle
        assert.strictEqual((yield* jobState(id)).status, "running")
        assert.isUndefined(closing.pollUnsafe(), "the runner waits for its running job")
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(closing)
        const done = yield* jobState(id)
        assert.deepStrictEqual([done.status, done.result, done.lease_owner], ["finished", { finished: true }, null])
        const waiting = yield* jobState(later)
        assert.deepStrictEqual([waiting.status, waiting.attempts, waiting.lease_owner], ["queued", 0, null])
      }).pipe(Effect.provide(Jobs.layer)))

    it.effect("hands its jobs back at shutdown once the drain time is over, without counting the attempt, and another runner picks them up at once", () =>
      Effect.gen(function*() {
        const jobs = yield* Jobs
        const companyId = yield* newCompany
        const kind = uniqueKind("shutdown")
        const started = yield* Deferred.make<void>()
        const first = yield* startRunner([handler(kind, () => Effect.andThen(Deferred.succeed(started, undefined), Effect.never))])
        const id = yield* jobs.enqueue(kind, companyId, { n: 1 })
        yield* Deferred.await(started)
        yield* Scope.close(first, Exit.void)
        const released = yield* jobState(id)
        assert.deepStrictEqual([released.status, released.attempts, released.lease_owner], ["queued", 0, null])

        const second = yield* startRunner([handler(kind, () => Effect.void)])
        const done = yield* whenStatus(id, "finished")
        assert.strictEqual(done.attempts, 1)
        yield* Scope.close(second, Exit.void)
      }).pipe(Effect.provide(Jobs.layer)))
  })

  describe("failures", () => {
    it.effect("a handler that dies leaves the job to be retried after the delay, from its last checkpoint", () =>
      Effect.gen(function*() {
        const jobs = yield* Jobs
        const companyId = yield* newCompany
        const kind = uniqueKind("retry", { retryDelay: () => "10 seconds" })
        const seen: Array<{ attempt: number; progress: Option.Option<{ done: number }> }> = []
        const runner = yield* startRunner([handler(kind, (job) =>
          Effect.gen(function*() {
            seen.push({ attempt: job.attempt, progress: job.progress })
            if (job.attempt === 1) {
              yield* job.advance({ done: 3 })
              return yield* Effect.die("boom")
            }
            yield* job.complete({ resumedAt: Option.getOrThrow(job.progress).done })
          }))])
        const id = yield* jobs.enqueue(kind, companyId, { n: 1 })
        const failed = yield* eventually(Effect.map(jobState(id), (s) => (s.status === "queued" && s.attempts === 1 ? s : undefined)))
        assert.deepStrictEqual([failed.lease_owner, failed.progress], [null, { done: 3 }])
        assert.include(failed.error ?? "", "boom")

        yield* settle
        yield* TestClock.adjust("9 seconds")
        yield* settle
        assert.strictEqual((yield* jobState(id)).status, "queued")
        const done = yield* advanceUntil(isStatus(id, "finished"), "1 second", "3 seconds")
        assert.deepStrictEqual([done.attempts, done.result, done.error], [2, { resumedAt: 3 }, null])
        assert.deepStrictEqual(seen, [{ attempt: 1, progress: Option.none() }, { attempt: 2, progress: Option.some({ done: 3 }) }])
        yield* Scope.close(runner, Exit.void)
      }).pipe(Effect.provide(Jobs.layer)))

    it.effect("gives up after maxAttempts, and a typed failure counts like a defect", () =>
      Effect.gen(function*() {
        const jobs = yield* Jobs
        const companyId = yield* newCompany
        const kind = uniqueKind("give-up", { maxAttempts: 2, retryDelay: () => "1 second" })
        let calls = 0
        const runner = yield* startRunner([handler(kind, () => Effect.suspend(() => {
          calls++
          return Effect.fail("refused")
        }))])
        const id = yield* jobs.enqueue(kind, companyId, { n: 1 })
        yield* eventually(Effect.map(jobState(id), (s) => (s.attempts === 1 && s.status === "queued" ? s : undefined)))
        yield* settle
        const failed = yield* advanceUntil(isStatus(id, "failed"), "1 second", "3 seconds")
        assert.deepStrictEqual([failed.attempts, calls, failed.lease_owner], [2, 2, null])
        assert.include(failed.error ?? "", "refused")
        yield* TestClock.adjust("1 hour")
        yield* settle
        assert.strictEqual(calls, 2)
        yield* Scope.close(runner, Exit.void)
      }).pipe(Effect.provide(Jobs.layer)))
  })

  describe("scheduling", () => {
    it.effect("runs at most `concurrency` jobs of a kind at once per runner; other kinds are not held up", () =>
      Effect.gen(function*() {
        const jobs = yield* Jobs
        const companyId = yield* newCompany
        // Leases far longer than the test's clock moves, so no job is adopted again while it waits.
        const limited = uniqueKind("limited", { concurrency: 2, lease: "1 day" })
        const free = uniqueKind("free", { lease: "1 day" })
        const gate = yield* Deferred.make<void>()
        let running = 0
        let peak = 0
        let freeRunning = 0
        const runner = yield* startRunner([
          handler(limited, () =>
            Effect.gen(function*() {
              running++
              peak = Math.max(peak, running)
              yield* Deferred.await(gate)
              running--
            })),
          handler(free, () =>
            Effect.gen(function*() {
              freeRunning++
              yield* Deferred.await(gate)
            }))
        ])
        for (let n = 0; n < 5; n++) yield* jobs.enqueue(limited, companyId, { n })
        for (let n = 0; n < 3; n++) yield* jobs.enqueue(free, companyId, { n })
        yield* eventually(Effect.sync(() => (running === 2 && freeRunning === 3 ? true : undefined)))
        yield* TestClock.adjust("5 minutes")
        yield* settle
        assert.deepStrictEqual([running, peak, freeRunning], [2, 2, 3])
        assert.deepStrictEqual((yield* statuses(limited)).sort(), ["queued", "queued", "queued", "running", "running"])

        // A finished job frees its slot at once, not at the next adoption round.
        yield* Deferred.succeed(gate, undefined)
        yield* eventually(Effect.map(statuses(limited), (s) => (s.every((x) => x === "finished") ? s : undefined)))
        assert.strictEqual(peak, 2)
        assert.deepStrictEqual(yield* statuses(free), ["finished", "finished", "finished"])
        yield* Scope.close(runner, Exit.void)
      }).pipe(Effect.provide(Jobs.layer)))

    it.effect("does not start a job before its run_after, and starts it once due", () =>
      Effect.gen(function*() {
        const jobs = yield* Jobs
        const companyId = yield* newCompany
        const kind = uniqueKind("later")
        const ran: Array<number> = []
        const runner = yield* startRunner([handler(kind, (job) => Effect.sync(() => ran.push(job.payload.n)))])
        const now = yield* DateTime.now
        const later = yield* jobs.enqueue(kind, companyId, { n: 2 }, { runAfter: DateTime.add(now, { minutes: 10 }) })
        const soon = yield* jobs.enqueue(kind, companyId, { n: 1 })
        yield* whenStatus(soon, "finished")
        yield* settle
        yield* TestClock.adjust("9 minutes")
        yield* settle
        assert.deepStrictEqual([ran, (yield* jobState(later)).status], [[1], "queued"])
        // The runner sleeps no longer than until the next due job (or the 30 s adoption round).
        yield* advanceUntil(isStatus(later, "finished"), "10 seconds", "90 seconds")
        assert.deepStrictEqual(ran, [1, 2])
        yield* Scope.close(runner, Exit.void)
      }).pipe(Effect.provide(Jobs.layer)))
  })
})

import { Cause, Clock, Context, Data, DateTime, Duration, Effect, Fiber, FiberSet, Layer, Option, Predicate, PubSub, Schema, type Scope } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { randomUUID } from "node:crypto"
import { drainBudgetMs, wallSleep } from "./Shutdown.ts"
import { idArray } from "./Sql.ts"

/** The job is no longer this runner's: its lease ran out and another runner adopted it. */
export class JobLeaseLost extends Data.TaggedError("JobLeaseLost")<{ readonly id: number }> {}

/**
 * A kind of durable job: what its payload and checkpoints look like, and how a runner treats it.
 * Declared in its area (beside the handler); the runner of `src/Background.ts` registers handlers.
 */
export interface JobKind<P, Pr> {
  readonly name: string
  readonly payload: Schema.Codec<P, unknown>
  readonly progress: Schema.Codec<Pr, unknown>
  /** Jobs of this kind one runner works at once. */
  readonly concurrency: number
  /** How long a claim holds without an `advance` or `renew`; after that any runner may adopt the job. */
  readonly lease: Duration.Duration
  /** Claims (first run, retries, adoptions after a runner died) before the job is marked failed. */
  readonly maxAttempts: number
  /** Wait before the next attempt once attempt `attempt` failed. */
  readonly retryDelay: (attempt: number) => Duration.Duration
}

export const jobKind = <P, Pr = never>(name: string, options: {
  readonly payload: Schema.Codec<P, unknown>
  readonly progress?: Schema.Codec<Pr, unknown>
  readonly concurrency?: number
  readonly lease?: Duration.Input
  readonly maxAttempts?: number
  readonly retryDelay?: (attempt: number) => Duration.Input
}): JobKind<P, Pr> => ({
  name,
  payload: options.payload,
  progress: options.progress ?? (Schema.Never as unknown as Schema.Codec<Pr, unknown>),
  concurrency: options.concurrency ?? Number.POSITIVE_INFINITY,
  lease: Duration.fromInputUnsafe(options.lease ?? "60 seconds"),
  maxAttempts: options.maxAttempts ?? 5,
  retryDelay: (attempt) =>
    options.retryDelay !== undefined
      ? Duration.fromInputUnsafe(options.retryDelay(attempt))
      : Duration.seconds(Math.min(30 * 2 ** (attempt - 1), 3600))
})

/** One claimed job, as its handler sees it. Every write checks the lease, so a runner that lost it stops at its next step. */
export interface JobRun<P, Pr> {
  readonly id: number
  readonly companyId: number
  readonly payload: P
  /** The last checkpoint (`advance`), when an earlier attempt got that far. */
  readonly progress: Option.Option<Pr>
  /** 1 on the first claim. */
  readonly attempt: number
  /** Records a checkpoint and renews the lease, in the caller's transaction (with the handler's own writes). */
  advance(progress: Pr): Effect.Effect<void, JobLeaseLost>
  readonly renew: Effect.Effect<void, JobLeaseLost>
  /**
   * Marks the job finished with `result`, in the caller's transaction (e.g. with the event that announces
   * it). A handler that returns without it finishes with a null result.
   */
  complete(result: unknown): Effect.Effect<void, JobLeaseLost>
}

/** What the runner reads of a kind: its name and how it is claimed and retried. */
export type JobRules = Pick<JobKind<unknown, unknown>, "name" | "concurrency" | "lease" | "maxAttempts" | "retryDelay">

/** A claimed row's controls, before its kind's schemas: a checkpoint arrives encoded. */
interface RowControls {
  advanceEncoded(progress: unknown): Effect.Effect<void, JobLeaseLost>
  readonly renew: Effect.Effect<void, JobLeaseLost>
  complete(result: unknown): Effect.Effect<void, JobLeaseLost>
}

/** A handler with its kind's types closed over: it decodes the row's payload and checkpoint itself. */
interface BoundHandler {
  run(row: ClaimedRow, controls: RowControls): Effect.Effect<void, unknown>
  readonly gaveUp: ((row: ClaimedRow, error: string) => Effect.Effect<void, unknown>) | undefined
}

/**
 * A kind's handler. A failure or defect leaves the job to be retried (after `retryDelay`, up to
 * `maxAttempts`); an interruption (shutdown) hands it back to the queue for any runner at once.
 */
export interface JobHandler<R> {
  readonly kind: JobRules
  readonly make: Effect.Effect<BoundHandler, never, R>
}

/** A job marked failed for good: its attempts are spent, or its runners kept dying. */
export interface JobGaveUp<P> {
  readonly id: number
  readonly companyId: number
  readonly payload: P
  readonly error: string
}

/** Claimed more often than its kind allows: each earlier claim ended with its runner stopping. */
export class JobAttemptsSpent extends Data.TaggedError("JobAttemptsSpent")<{ readonly attempts: number }> {
  override get message() {
    return `gave up after ${this.attempts} attempts whose runners stopped`
  }
}

const bind = <P, Pr>(
  kind: JobKind<P, Pr>,
  handle: (job: JobRun<P, Pr>) => Effect.Effect<void, unknown>,
  gaveUp: ((job: JobGaveUp<P>) => Effect.Effect<void, unknown>) | undefined
): BoundHandler => {
  const decodePayload = Schema.decodeUnknownEffect(kind.payload)
  const decodeProgress = Schema.decodeUnknownEffect(kind.progress)
  const encodeProgress = Schema.encodeEffect(kind.progress)
  return {
    run: (row, controls) =>
      Effect.gen(function*() {
        const payload = yield* decodePayload(row.payload)
        const progress = row.progress === null ? Option.none() : Option.some(yield* decodeProgress(row.progress))
        const advance = (next: Pr) => Effect.flatMap(Effect.orDie(encodeProgress(next)), controls.advanceEncoded)
        yield* handle({ id: row.id, companyId: row.company_id, payload, progress, attempt: row.attempts, advance, renew: controls.renew, complete: controls.complete })
      }),
    gaveUp: gaveUp === undefined ? undefined : (row, error) =>
      Effect.flatMap(decodePayload(row.payload), (payload) => gaveUp({ id: row.id, companyId: row.company_id, payload, error }))
  }
}

/**
 * `gaveUp`, when given, runs in the transaction that marks the job failed for good, so the area's
 * own record (say, an export left `processing`) does not wait forever; its failure is logged and
 * does not keep the job alive.
 */
export const jobHandler = <P, Pr, R>(
  kind: JobKind<P, Pr>,
  make: Effect.Effect<(job: JobRun<P, Pr>) => Effect.Effect<void, unknown>, never, R>,
  gaveUp?: Effect.Effect<(job: JobGaveUp<P>) => Effect.Effect<void, unknown>, never, R>
): JobHandler<R> => ({
  kind,
  make: Effect.gen(function*() {
    const handle = yield* make
    const settle = gaveUp === undefined ? undefined : yield* gaveUp
    return bind(kind, handle, settle)
  })
})

/** How often a runner looks for jobs to adopt (handed back at shutdown, or whose runner died). */
export const adoptEvery = Duration.seconds(30)

/** At shutdown, how long a runner lets its running jobs finish before it hands the rest back (less if the process's budget is short). */
export const drainFor = Duration.seconds(3)

interface ClaimedRow {
  readonly id: number
  readonly company_id: number
  readonly payload: unknown
  readonly progress: unknown
  readonly attempts: number
}

const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))
const after = (from: Date, duration: Duration.Duration) => new Date(from.getTime() + Duration.toMillis(duration))
const json = (value: unknown) => JSON.stringify(value ?? null)

export class Jobs extends Context.Service<Jobs, {
  /**
   * Records a job of `kind` (in the caller's transaction, if any); after commit the runners of
   * this process look for work at once. It runs from `runAfter` (default: now, by `Clock`).
   */
  enqueue<P, Pr>(kind: JobKind<P, Pr>, companyId: number, payload: P, options?: {
    readonly runAfter?: DateTime.DateTime
    /** false: no runner is woken; a job that is only a fallback is found by the runners' next poll. */
    readonly wake?: boolean
  }): Effect.Effect<number>
  /**
   * `enqueue` of a job that stands for "do it now" (a refresh): while a job of `kind` for the company is
   * still queued (not yet claimed, or waiting for its retry) no other is recorded; that one is due at once
   * instead. Its `queued` is false then.
   */
  enqueueOnce<P, Pr>(kind: JobKind<P, Pr>, companyId: number, payload: P): Effect.Effect<{ readonly id: number; readonly queued: boolean }>
  /**
   * Moves a queued job's start to `runAfter`; false when it is no longer queued (a runner claimed it, or
   * it ended). Work done in process with a queued job as its fallback holds the job off this way.
   */
  postpone(companyId: number, id: number, runAfter: DateTime.DateTime): Effect.Effect<boolean>
  /**
   * `enqueue` of jobs of one kind as a statement to embed in the caller's own (`fallback AS (…)`): each
   * payload's job is inserted only where `when` holds for it (a condition that reads its `key` as
   * `p.key`), returning each job's `id` and `payload`. No runner is woken: for fallbacks found by the
   * next poll.
   */
  enqueueing<P, Pr>(
    kind: JobKind<P, Pr>,
    companyId: number,
    payloads: ReadonlyArray<{ readonly key: string; readonly payload: P }>,
    runAfter: DateTime.DateTime,
    when: Statement.Fragment
  ): Effect.Effect<Statement.Fragment>
  /** Marks a still-queued job finished without running it, in the caller's transaction if any: its work was done in process. */
  dismiss(companyId: number, id: number): Effect.Effect<void>
  /** `dismiss` of some jobs as a statement to embed in the caller's own (`dismissed AS (…)`). */
  dismissing(companyId: number, ids: ReadonlyArray<number>): Statement.Fragment
  /** Signals to this process's runners that there may be work. */
  readonly wake: Effect.Effect<void>
  readonly wakeups: Effect.Effect<PubSub.Subscription<void>, never, Scope.Scope>
}>()("crm/platform/Jobs") {
  static readonly layer = Layer.effect(
    Jobs,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const bus = yield* PubSub.sliding<void>(1)
      const wake = PubSub.publish(bus, undefined).pipe(Effect.asVoid)

      const enqueue = Effect.fn("Jobs.enqueue")(function*<P, Pr>(kind: JobKind<P, Pr>, companyId: number, payload: P, options?: {
        readonly runAfter?: DateTime.DateTime
        readonly wake?: boolean
      }) {
        const encoded = yield* Schema.encodeEffect(kind.payload)(payload)
        const runAfter = options?.runAfter !== undefined ? DateTime.toDateUtc(options.runAfter) : yield* nowDate
        const rows = yield* sql<{ id: number }>`
          INSERT INTO jobs (kind, company_id, payload, run_after)
          VALUES (${kind.name}, ${companyId}, ${json(encoded)}::jsonb, ${runAfter})
          RETURNING id`
        if (options?.wake !== false) yield* sql.afterCommit(wake)
        return Number(rows[0].id)
      }, Effect.orDie)

      const enqueueOnce = Effect.fn("Jobs.enqueueOnce")(function*<P, Pr>(kind: JobKind<P, Pr>, companyId: number, payload: P) {
        // Two requests at once would both find nothing queued: the lock orders them.
        yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`jobs:${kind.name}`}), ${companyId}::int)`
        const now = yield* nowDate
        const waiting = yield* sql<{ id: number }>`
          UPDATE jobs SET run_after = LEAST(run_after, ${now}), updated_at = now()
          WHERE id = (SELECT id FROM jobs WHERE company_id = ${companyId} AND kind = ${kind.name} AND status = 'queued' ORDER BY id LIMIT 1)
            AND status = 'queued'
          RETURNING id`
        if (waiting.length > 0) {
          yield* sql.afterCommit(wake)
          return { id: Number(waiting[0].id), queued: false }
        }
        return { id: yield* enqueue(kind, companyId, payload), queued: true }
      }, sql.withTransaction, Effect.orDie)

      const postpone = (companyId: number, id: number, runAfter: DateTime.DateTime) =>
        sql<{ id: number }>`
          UPDATE jobs SET run_after = ${DateTime.toDateUtc(runAfter)}, updated_at = now()
          WHERE company_id = ${companyId} AND id = ${id} AND status = 'queued' RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const enqueueing = <P, Pr>(
        kind: JobKind<P, Pr>,
        companyId: number,
        payloads: ReadonlyArray<{ readonly key: string; readonly payload: P }>,
        runAfter: DateTime.DateTime,
        when: Statement.Fragment
      ) =>
        Effect.map(
          Effect.orDie(Effect.forEach(payloads, (p) => Effect.map(Schema.encodeEffect(kind.payload)(p.payload), (payload) => ({ key: p.key, payload })))),
          (encoded) =>
            sql`
              INSERT INTO jobs (kind, company_id, payload, run_after)
              SELECT ${kind.name}, ${companyId}, p.payload, ${DateTime.toDateUtc(runAfter)}
              FROM ROWS FROM (jsonb_to_recordset(${json(encoded)}::jsonb) AS (key text, payload jsonb)) AS p
              WHERE ${when}
              RETURNING id, payload`
        )

      const dismissing = (companyId: number, ids: ReadonlyArray<number>) =>
        sql`
          UPDATE jobs SET status = 'finished', finished_at = now(), updated_at = now()
          WHERE company_id = ${companyId} AND id = ANY(${idArray(ids)}::bigint[]) AND status = 'queued' RETURNING id`

      const dismiss = (companyId: number, id: number) => dismissing(companyId, [id]).pipe(Effect.asVoid, Effect.orDie)

      return Jobs.of({ enqueue, enqueueOnce, enqueueing, postpone, dismiss, dismissing, wake, wakeups: PubSub.subscribe(bus) })
    })
  )

  /**
   * The runner: claims due jobs of the registered kinds (up to each kind's concurrency), adopts
   * jobs whose lease ran out. When its scope closes it stops claiming, lets running jobs finish for
   * up to `drain` (default `drainFor`) and hands the rest back. Claims are one statement
   * (`FOR UPDATE SKIP LOCKED`), so runners of several processes share the table.
   */
  static readonly runner = <R>(handlers: ReadonlyArray<JobHandler<R>>, options?: { readonly drain?: Duration.Input }) =>
    Layer.effectDiscard(Effect.gen(function*() {
      const jobs = yield* Jobs
      const sql = yield* SqlClient.SqlClient
      const fibers = yield* FiberSet.make<void, never>()
      const wakeups = yield* jobs.wakeups
      const kinds = yield* Effect.forEach(handlers, (h) => Effect.map(h.make, (bound) => ({ kind: h.kind, bound, running: 0 })))
      if (kinds.length === 0) return
      const names = kinds.map((k) => k.kind.name)

      const claim = Effect.fnUntraced(function*(kind: JobRules, owner: string) {
        const now = yield* nowDate
        const rows = yield* sql<ClaimedRow>`
          UPDATE jobs SET status = 'running', lease_owner = ${owner}, lease_until = ${after(now, kind.lease)},
            attempts = attempts + 1, updated_at = now()
          WHERE id = (
            SELECT id FROM jobs
            WHERE kind = ${kind.name} AND status IN ('queued', 'running')
              AND ((status = 'queued' AND run_after <= ${now}) OR (status = 'running' AND (lease_until IS NULL OR lease_until < ${now})))
            ORDER BY id
            LIMIT 1
            FOR UPDATE SKIP LOCKED)
          RETURNING id, company_id, payload, progress, attempts`
        return Option.fromNullishOr(rows[0])
      })

      const work = (entry: typeof kinds[number], row: ClaimedRow, owner: string) => {
        const { kind } = entry
        const mine = sql`company_id = ${row.company_id} AND id = ${row.id} AND lease_owner = ${owner} AND status = 'running'`
        const held = (rows: ReadonlyArray<unknown>) => rows.length > 0 ? Effect.void : Effect.fail(new JobLeaseLost({ id: row.id }))
        const renewal = Effect.map(nowDate, (now) => sql`lease_until = ${after(now, kind.lease)}`)

        const advanceEncoded = (encoded: unknown) =>
          Effect.gen(function*() {
            const rows = yield* sql`
              UPDATE jobs SET progress = ${json(encoded)}::jsonb, ${yield* renewal}, updated_at = now()
              WHERE ${mine} RETURNING id`.pipe(Effect.orDie)
            return yield* held(rows)
          })
        const renew = Effect.gen(function*() {
          const rows = yield* sql`UPDATE jobs SET ${yield* renewal}, updated_at = now() WHERE ${mine} RETURNING id`.pipe(Effect.orDie)
          return yield* held(rows)
        })
        const complete = (result: unknown) =>
          sql`
            UPDATE jobs SET status = 'finished', result = ${json(result)}::jsonb, error = NULL, lease_owner = NULL,
              lease_until = NULL, finished_at = now(), updated_at = now()
            WHERE ${mine} RETURNING id`.pipe(Effect.orDie, Effect.flatMap(held))

        const fail = (cause: Cause.Cause<unknown>) =>
          Effect.gen(function*() {
            const now = yield* nowDate
            const giveUp = row.attempts >= kind.maxAttempts
            yield* Effect.logWarning(giveUp ? "job failed for good" : "job failed; it will be retried", cause)
            const error = Cause.pretty(cause)
            const marked = yield* sql`
              UPDATE jobs SET status = ${giveUp ? "failed" : "queued"}, error = ${error},
                lease_owner = NULL, lease_until = NULL, run_after = ${after(now, kind.retryDelay(row.attempts))},
                finished_at = ${giveUp ? sql`now()` : sql`NULL`}, updated_at = now()
              WHERE ${mine} RETURNING id`
            if (!giveUp || marked.length === 0 || entry.bound.gaveUp === undefined) return
            yield* entry.bound.gaveUp(row, error).pipe(
              // A savepoint: the job stays failed whatever the area's bookkeeping does.
              sql.withTransaction,
              Effect.catchCause((cause) => Effect.logError("job given up; its area could not record it", cause))
            )
          }).pipe(sql.withTransaction)

        // At shutdown the job goes back to the queue, for the next runner (or this one restarted); the claim did not count.
        const release = sql`
          UPDATE jobs SET status = 'queued', lease_owner = NULL, lease_until = NULL, attempts = GREATEST(attempts - 1, 0),
            updated_at = now()
          WHERE ${mine}`.pipe(Effect.ignore)

        const run = Effect.gen(function*() {
          if (row.attempts > kind.maxAttempts) return yield* new JobAttemptsSpent({ attempts: kind.maxAttempts })
          yield* entry.bound.run(row, { advanceEncoded, renew, complete })
          yield* complete(null).pipe(Effect.ignore)
        })

        return run.pipe(
          Effect.onInterrupt(() => release),
          Effect.catchCause((cause) => {
            if (Cause.hasInterruptsOnly(cause)) return Effect.interrupt
            const error = Cause.findError(cause)
            if (error._tag === "Success" && Predicate.isTagged(error.success, "JobLeaseLost")) {
              return Effect.logInfo("job lease lost; its adopter carries on")
            }
            return fail(cause)
          }),
          Effect.catchCause((cause) => Cause.hasInterruptsOnly(cause) ? Effect.interrupt : Effect.logError("job bookkeeping failed", cause)),
          Effect.ensuring(Effect.andThen(Effect.sync(() => entry.running--), jobs.wake)),
          Effect.annotateLogs({ job: row.id, job_kind: kind.name, company_id: row.company_id })
        )
      }

      let stopping = false
      const poll = Effect.gen(function*() {
        let claimed = true
        while (claimed && !stopping) {
          claimed = false
          for (const entry of kinds) {
            if (entry.running >= entry.kind.concurrency || stopping) continue
            const owner = randomUUID()
            // A claim is not cut from the fiber that works it: a stop between them would leave the job leased by nobody.
            const started = yield* Effect.uninterruptible(Effect.gen(function*() {
              const row = yield* claim(entry.kind, owner)
              if (Option.isNone(row)) return false
              entry.running++
              yield* FiberSet.run(fibers, Effect.interruptible(work(entry, row.value, owner)))
              return true
            }))
            claimed ||= started
          }
        }
      })

      /** Until the next scheduled job falls due, or the next adoption round, whichever is first. */
      const pause = Effect.gen(function*() {
        const now = yield* nowDate
        const rows = yield* sql<{ due: Date | null }>`
          SELECT min(run_after) AS due FROM jobs
          WHERE kind IN ${sql.in(names)} AND status = 'queued' AND run_after > ${now}`
        const due = rows[0]?.due
        if (due === null || due === undefined) return adoptEvery
        return Duration.min(adoptEvery, Duration.millis(Math.max(0, due.getTime() - now.getTime())))
      })

      const polling = yield* Effect.forkScoped(Effect.forever(
        Effect.andThen(poll, pause).pipe(
          Effect.catchCause((cause) => Effect.as(Effect.logWarning("job polling failed", cause), adoptEvery)),
          Effect.flatMap((wait) => Effect.timeoutOption(PubSub.take(wakeups), wait))
        )
      ))

      // Runs before the fiber set's own finalizer, which interrupts what is still running: each such job is handed back.
      const drain = Duration.toMillis(Duration.fromInputUnsafe(options?.drain ?? drainFor))
      yield* Effect.addFinalizer(() =>
        Effect.gen(function*() {
          stopping = true
          yield* Fiber.interrupt(polling)
          const running = yield* FiberSet.size(fibers)
          if (running === 0) return
          const budget = drainBudgetMs(drain)
          const finished = yield* Effect.raceFirst(Effect.as(FiberSet.awaitEmpty(fibers), true), Effect.as(wallSleep(budget), false))
          if (!finished) {
            yield* Effect.logInfo("jobs still running at shutdown are handed back").pipe(
              Effect.annotateLogs({ running: yield* FiberSet.size(fibers), waited_ms: budget })
            )
          }
        })
      )
    }))
}

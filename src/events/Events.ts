import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, PubSub, Queue, type Scope } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../platform/Config.ts"
import type { EventEnvelope } from "./Domain.ts"
import { EventsRepo, type Notify } from "./Repo.ts"
import { CompanyId } from "../auth/Domain.ts"

const channel = "crm_events"
// PostgreSQL caps a NOTIFY payload at 8000 bytes; bigger events travel by id.
const inlineLimit = 7000

interface Notice {
  readonly n: string
  readonly c: number
  readonly i: number
  readonly e?: EventEnvelope
}

/** How long a committed event may wait unnumbered (its runner died before numbering it) before the sweep numbers it. */
const sweepAfterMs = 1_000

export class Events extends Context.Service<Events, {
  /**
   * Appends an event in the caller's transaction (`along`: data-modifying CTEs, `name AS (UPDATE …)`,
   * written in the same statement, so a hot path needs no transaction of its own). After commit the
   * company's sequencer gives it the next number and only then do subscribers see it: in-process on
   * this runner, through NOTIFY on the others. A rolled-back event is never numbered nor seen.
   */
  emit(companyId: number, key: string, payload: unknown, along?: Statement.Fragment): Effect.Effect<void>
  /** The company's events after `after`, numbering first what has committed (so a writer reads its own events). */
  replay(companyId: number, after: number, limit: number): Effect.Effect<ReadonlyArray<EventEnvelope>>
  /** Committed, numbered events of every company, from this runner and the others. */
  readonly subscribe: Effect.Effect<PubSub.Subscription<EventEnvelope>, never, Scope.Scope>
}>()("crm/events/Events") {
  static readonly layer = Layer.effect(
    Events,
    Effect.gen(function*() {
      const repo = yield* EventsRepo
      const sql = yield* SqlClient.SqlClient
      const config = yield* AppConfig
      const bus = yield* PubSub.unbounded<EventEnvelope>()
      const scope = yield* Effect.scope
      const node = randomUUID()
      const crossNode = Option.isSome(config.databaseUrl)

      if (crossNode) {
        const pg = yield* PgClient.PgClient
        const notifications = yield* pg.listen(channel).pipe(Effect.orDie)
        yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
          const notification = yield* Queue.take(notifications).pipe(Effect.orDie)
          const notice = JSON.parse(notification.payload) as Notice
          if (notice.n === node) return
          const events = notice.e !== undefined ? [notice.e] : yield* repo.bySeq(CompanyId.make(notice.c), notice.i)
          for (const event of events) yield* PubSub.publish(bus, event)
        }).pipe(Effect.catchCause((cause) => Effect.logWarning("event notification dropped", cause)))))
      }

      const notify: Notify | null = crossNode ? { channel, node, inlineLimit } : null

      const sequence = (companyId: number) =>
        Effect.flatMap(repo.sequence(CompanyId.make(companyId), notify), (events) => PubSub.publishAll(bus, events))

      // One numbering run per company at a time on this runner; commits arriving during a run ask
      // for one more, so a burst of writes is numbered in a few batches rather than one by one.
      const runs = new Map<number, { again: boolean }>()
      const request = (companyId: number) =>
        Effect.suspend(() => {
          const running = runs.get(companyId)
          if (running !== undefined) {
            running.again = true
            return Effect.void
          }
          const run = { again: true }
          runs.set(companyId, run)
          const loop: Effect.Effect<void> = Effect.suspend(() => {
            if (!run.again) return Effect.void
            run.again = false
            return Effect.andThen(sequence(companyId), loop)
          })
          return loop.pipe(
            Effect.catchCause((cause) => Effect.logWarning("event numbering failed; the sweep retries", cause)),
            Effect.ensuring(Effect.sync(() => runs.delete(companyId))),
            Effect.forkIn(scope),
            Effect.asVoid
          )
        })

      yield* Effect.forkScoped(
        repo.unsequenced(sweepAfterMs).pipe(
          Effect.flatMap((companies) => Effect.forEach(companies, request, { discard: true })),
          Effect.catchCause((cause) => Effect.logWarning("event sweep failed", cause)),
          Effect.delay(sweepAfterMs),
          Effect.forever
        )
      )

      const emit = Effect.fnUntraced(function*(companyId: number, key: string, payload: unknown, along?: Statement.Fragment) {
        yield* repo.insert(CompanyId.make(companyId), key, payload, along)
        yield* sql.afterCommit(request(companyId))
      })

      return Events.of({
        emit,
        replay: (companyId, after, limit) => Effect.andThen(sequence(companyId), repo.after(CompanyId.make(companyId), after, limit)),
        subscribe: PubSub.subscribe(bus)
      })
    })
  ).pipe(Layer.provide(EventsRepo.layer))
}

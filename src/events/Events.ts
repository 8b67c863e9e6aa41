import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, PubSub, Queue, type Scope } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../platform/Config.ts"
import type { EventEnvelope } from "./Domain.ts"
import { EventsRepo, type Notify } from "./Repo.ts"

const channel = "crm_events"
// PostgreSQL caps a NOTIFY payload at 8000 bytes; bigger events travel by id.
const inlineLimit = 7000

interface Notice {
  readonly n: string
  readonly c: number
  readonly i: number
  readonly e?: EventEnvelope
}

export class Events extends Context.Service<Events, {
  /**
   * Appends an event in the caller's transaction. Subscribers see it only after
   * commit: in-process through `afterCommit`, on other runners through a NOTIFY
   * that PostgreSQL delivers only when the transaction commits.
   *
   * `along`: data-modifying CTEs (`name AS (UPDATE …)`) that belong with the event, written in
   * the same statement. A hot path that has nothing else to write then needs no transaction
   * and no extra round trips while it holds the company's sequence row.
   */
  emit(companyId: number, key: string, payload: unknown, along?: Statement.Fragment): Effect.Effect<EventEnvelope>
  replay(companyId: number, after: number, limit: number): Effect.Effect<ReadonlyArray<EventEnvelope>>
  /** Committed events of every company, from this runner and the others. */
  readonly subscribe: Effect.Effect<PubSub.Subscription<EventEnvelope>, never, Scope.Scope>
}>()("crm/events/Events") {
  static readonly layer = Layer.effect(
    Events,
    Effect.gen(function*() {
      const repo = yield* EventsRepo
      const sql = yield* SqlClient.SqlClient
      const config = yield* AppConfig
      const bus = yield* PubSub.unbounded<EventEnvelope>()
      const node = randomUUID()
      const crossNode = Option.isSome(config.databaseUrl)

      if (crossNode) {
        const pg = yield* PgClient.PgClient
        const notifications = yield* pg.listen(channel).pipe(Effect.orDie)
        yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
          const notification = yield* Queue.take(notifications).pipe(Effect.orDie)
          const notice = JSON.parse(notification.payload) as Notice
          if (notice.n === node) return
          const events = notice.e !== undefined ? [notice.e] : yield* repo.bySeq(notice.c, notice.i)
          for (const event of events) yield* PubSub.publish(bus, event)
        }).pipe(Effect.catchCause((cause) => Effect.logWarning("event notification dropped", cause)))))
      }

      const notify: Notify | null = crossNode ? { channel, node, inlineLimit } : null
      const emit = Effect.fnUntraced(function*(companyId: number, key: string, payload: unknown, along?: Statement.Fragment) {
        const event = yield* repo.insert(companyId, key, payload, notify, along)
        yield* sql.afterCommit(PubSub.publish(bus, event).pipe(Effect.asVoid))
        return event
      })

      return Events.of({
        emit,
        replay: repo.after,
        subscribe: PubSub.subscribe(bus)
      })
    })
  ).pipe(Layer.provide(EventsRepo.layer))
}

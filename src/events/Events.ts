import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, PubSub, Queue, type Scope, Semaphore } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../platform/Config.ts"
import { isNoticeFrame, noticeChannel, Notices } from "../platform/Notices.ts"
import type { EventEnvelope } from "./Domain.ts"
import { EventsRepo, type Notify } from "./Repo.ts"
import { CompanyId } from "../auth/Domain.ts"

const channel = noticeChannel
// PostgreSQL caps a NOTIFY payload at 8000 bytes; bigger events travel by id.
const inlineLimit = 7000

interface Notice {
  readonly n: string
  readonly c: number
  readonly i: number
  readonly e?: EventEnvelope
}

/**
 * Events emitted at once from which they are numbered as they are written (`EventsRepo.appendNumbered`:
 * one write each, and no read back of their payloads) instead of by the sequencer after commit. Only
 * batch writers reach it; a request's few events stay off the counter lock, which would queue a
 * company's concurrent requests behind each other's commits.
 */
const numberedFrom = 16

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
  /**
   * `emit` for many events of one company in one statement (numbered in this order); with `when`, a
   * condition over `along`'s CTEs, they are written only if it holds (the conditional write happened);
   * it may read the event it is checked for as `v` (`v.key`, `v.payload`), to write some of them.
   * A batch (`numberedFrom` events, no `when`) is numbered as it is written: `along` runs as its own
   * statement, then the events under the company's counter lock, in a transaction (a savepoint in the
   * caller's), so a caller's transaction must end soon after.
   */
  emitMany(
    companyId: number,
    events: ReadonlyArray<{ readonly key: string; readonly payload: unknown }>,
    along?: Statement.Fragment,
    when?: Statement.Fragment
  ): Effect.Effect<void>
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
      const notices = yield* Notices
      const bus = yield* PubSub.unbounded<EventEnvelope>()
      const scope = yield* Effect.scope
      const node = randomUUID()
      const crossNode = Option.isSome(config.databaseUrl)

      // What this runner has published, per company: the last number. Events reach it from its own
      // sequencer and from the other runners' NOTIFYs, in either order, and after a lost LISTEN from
      // the log; each is published once and in order, a gap being read from the log first.
      const published = new Map<number, number>()
      const gate = yield* Semaphore.make(1)
      // Events that follow what was published go out in one publish (a batch's hundreds of events make no
      // effect each, which would outlive young collections while the gate is held); a gap is read back first.
      const publishInOrder = (events: ReadonlyArray<EventEnvelope>, from: number): Effect.Effect<void> =>
        Effect.suspend(() => {
          const next: Array<EventEnvelope> = []
          for (let i = from; i < events.length; i++) {
            const companyId = Number(events[i].company_id)
            const seq = Number(events[i].seq)
            const last = published.get(companyId) ?? 0
            if (seq <= last) continue
            if (seq > last + 1) {
              return PubSub.publishAll(bus, next).pipe(
                Effect.andThen(readBack(companyId, seq - 1)),
                Effect.andThen(Effect.sync(() => published.set(companyId, Math.max(published.get(companyId) ?? 0, seq - 1)))),
                Effect.andThen(publishInOrder(events, i))
              )
            }
            published.set(companyId, seq)
            next.push(events[i])
          }
          return next.length === 0 ? Effect.void : Effect.asVoid(PubSub.publishAll(bus, next))
        })
      const deliver = (events: ReadonlyArray<EventEnvelope>): Effect.Effect<void> => gate.withPermits(1)(publishInOrder(events, 0))
      /** Publishes the company's logged events after the last one published, up to `upTo`. */
      const readBack = (companyId: number, upTo: number): Effect.Effect<void> =>
        Effect.gen(function*() {
          while (true) {
            const last = published.get(companyId) ?? 0
            if (last >= upTo) return
            const page = yield* repo.after(CompanyId.make(companyId), last, Math.min(500, upTo - last))
            if (page.length === 0) return
            for (const event of page) {
              if (Number(event.seq) > upTo) return
              published.set(companyId, Number(event.seq))
              yield* PubSub.publish(bus, event)
            }
          }
        })

      // Companies that have events when this runner starts count as published up to now; one created
      // later starts at 0.
      for (const head of yield* repo.heads) published.set(Number(head.company_id), Number(head.event_seq))

      if (crossNode) {
        const pg = yield* PgClient.PgClient
        let failures = 0
        const handle = (payload: string) =>
          Effect.gen(function*() {
            const parsed: unknown = JSON.parse(payload)
            if (isNoticeFrame(parsed)) {
              if (parsed.n !== notices.node) yield* notices.receive({ _tag: "Notice", topic: parsed.t, payload: parsed.p })
              return
            }
            const notice = parsed as Notice
            if (notice.n === node) return
            // Without its event, a notice announces a numbering run that ended at `i`: read up to it from the log.
            // A notice from a runner older than the envelope's `id` is read back from the log like a long one.
            if (notice.e !== undefined && typeof notice.e.id === "string") yield* deliver([notice.e])
            else yield* gate.withPermits(1)(readBack(notice.c, notice.i))
          }).pipe(Effect.catchCause((cause) => Effect.logWarning("event notification dropped", cause)))
        // One LISTEN connection's life: a lost connection fails the queue, which ends the session
        // (a dead queue fails every take at once, so it must never be taken from again).
        const session = Effect.scoped(Effect.gen(function*() {
          const notifications = yield* pg.listen(channel)
          yield* notices.receive({ _tag: "Listening" })
          const recovering = failures > 0
          failures = 0
          // NOTIFYs sent while nobody listened are gone; the log has their events. The heads are read
          // after LISTEN, so an event is either read back here or announced to the new listener.
          const heads = yield* repo.heads
          const behind = heads.filter((head) => Number(head.event_seq) > (published.get(Number(head.company_id)) ?? 0))
          yield* gate.withPermits(1)(
            Effect.forEach(behind, (head) => readBack(Number(head.company_id), Number(head.event_seq)), { discard: true })
          )
          if (recovering) yield* Effect.logInfo("event listener reconnected", { companies_read_back: behind.length })
          while (true) {
            const notification = yield* Queue.take(notifications)
            yield* handle(notification.payload)
          }
        }))
        yield* Effect.forkScoped(Effect.forever(
          session.pipe(
            Effect.catchCause((cause) => Effect.logWarning("event listener lost; reconnecting", cause)),
            Effect.andThen(Effect.suspend(() => {
              failures += 1
              return Effect.sleep(Math.min(5_000, 100 * 2 ** Math.min(failures, 10)))
            }))
          )
        ))
      }

      const notify: Notify | null = crossNode ? { channel, node, inlineLimit } : null

      const sequence = (companyId: number) =>
        Effect.flatMap(repo.sequence(CompanyId.make(companyId), notify), deliver)

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

      const emitMany = Effect.fnUntraced(function*(
        companyId: number,
        list: ReadonlyArray<{ readonly key: string; readonly payload: unknown }>,
        along?: Statement.Fragment,
        when?: Statement.Fragment
      ) {
        if (list.length === 0 && along === undefined) return
        if (list.length >= numberedFrom && when === undefined) {
          // The companion writes first, so that the counter lock is held only for the events and the commit.
          const appended = yield* Effect.gen(function*() {
            if (along !== undefined) yield* sql`WITH ${along} SELECT 1`.unprepared
            return yield* repo.appendNumbered(CompanyId.make(companyId), list, notify)
          }).pipe(sql.withTransaction, Effect.orDie)
          const occurredAt = appended.at.toISOString()
          const envelopes = list.map((e, i): EventEnvelope => ({
            id: appended.ids[i],
            seq: appended.first + i,
            event: e.key,
            company_id: companyId,
            occurred_at: occurredAt,
            data: e.payload
          }))
          return yield* sql.afterCommit(deliver(envelopes))
        }
        yield* repo.insertMany(CompanyId.make(companyId), list, along, when)
        if (list.length > 0) yield* sql.afterCommit(request(companyId))
      })

      return Events.of({
        emit,
        emitMany,
        replay: (companyId, after, limit) => Effect.andThen(sequence(companyId), repo.after(CompanyId.make(companyId), after, limit)),
        subscribe: PubSub.subscribe(bus)
      })
    })
  ).pipe(Layer.provide(EventsRepo.layer))
}

import { Effect, Layer, PubSub, Schedule, Semaphore } from "effect"
import { CompanyId } from "../auth/Domain.ts"
import type { EventEnvelope } from "../events/Domain.ts"
import { Events } from "../events/Events.ts"
import { RunExecutor } from "./Executor.ts"
import { TriggerCursorsRepo } from "./Repo.ts"
import { AutomationStarter, type Started, type StartRequest } from "./Starter.ts"
import { TriggerIndex } from "./Triggers.ts"

/** Events the consumer handles at once; more wait in its subscription. */
const eventsInFlight = 64
/**
 * First segments of one company's runs executing at once in this process; more wait, their fallback
 * jobs held off. As for the job kind, a burst queues here rather than taking every pooled connection
 * from the requests (and the other companies) that feed it.
 */
export const runsPerCompany = 32
const flushEveryMs = 200
const replayPage = 500
/** Attempts at an event's triggers (a database outage) before it is logged and passed over. */
const eventAttempts = 8

interface Track {
  /** Events taken and not yet handled: the cursor stays before the first of them. */
  readonly inflight: Set<number>
  seen: number
  dirty: boolean
}

/**
 * The consumer of committed events that starts runs. Each event's matched runs are admitted (run row
 * and fallback job, in the `Automation` entity) and their first segments run at once in this process,
 * at most `runsPerCompany` per company. A durable cursor per company (`automation_trigger_cursors`)
 * follows the events whose runs are written; a runner that starts replays the log after it first, so
 * an event committed just before a runner died still starts its runs. A run is admitted once per
 * (automation, event), so what is replayed twice, or seen by several runners, starts once.
 */
export const AutomationTriggersLayer = Layer.effectDiscard(Effect.gen(function*() {
  const events = yield* Events
  const index = yield* TriggerIndex
  const starter = yield* AutomationStarter
  const executor = yield* RunExecutor
  const cursors = yield* TriggerCursorsRepo
  const subscription = yield* events.subscribe
  const scope = yield* Effect.scope
  const slots = yield* Semaphore.make(eventsInFlight)
  const companySlots = new Map<number, Semaphore.Semaphore>()
  const tracks = new Map<number, Track>()
  const recovering = new Set<number>()

  const runFirstSegment = (companyId: number, started: Started, request: StartRequest) => {
    let slot = companySlots.get(companyId)
    if (slot === undefined) {
      slot = Semaphore.makeUnsafe(runsPerCompany)
      companySlots.set(companyId, slot)
    }
    return slot.withPermits(1)(executor.direct(CompanyId.make(companyId), started, request)).pipe(
      Effect.catchCause((cause) => Effect.logWarning("automation run failed in process; its fallback job carries on", cause)),
      Effect.forkIn(scope),
      Effect.asVoid
    )
  }

  const handle = (event: EventEnvelope): Effect.Effect<void> =>
    index.match(event).pipe(
      Effect.flatMap((starts) =>
        Effect.forEach(starts, (s) =>
          Effect.flatMap(starter.start(s), (started) => (started === null ? Effect.void : runFirstSegment(s.companyId, started, s))), {
          concurrency: "unbounded",
          discard: true
        })),
      Effect.catchDefect((defect) => Effect.fail(defect)),
      Effect.retry({ times: eventAttempts - 1, schedule: Schedule.exponential("200 millis") }),
      Effect.catchCause((cause) =>
        Effect.logError("automation triggers of an event not handled; the event is passed over", { event: event.event, seq: event.seq }, cause))
    )

  const trackOf = (companyId: number) => {
    let track = tracks.get(companyId)
    if (track === undefined) {
      track = { inflight: new Set(), seen: 0, dirty: false }
      tracks.set(companyId, track)
    }
    return track
  }

  const flush = Effect.suspend(() => {
    const moved: Array<{ companyId: number; seq: number }> = []
    for (const [companyId, track] of tracks) {
      if (!track.dirty || recovering.has(companyId)) continue
      track.dirty = false
      let seq = track.seen
      for (const pending of track.inflight) seq = Math.min(seq, pending - 1)
      moved.push({ companyId, seq })
    }
    return cursors.advance(moved)
  })

  // What committed while no runner of this process was consuming (it died, or had not started): the
  // log after each company's cursor, up to its head when this runner started.
  const recover = Effect.gen(function*() {
    const behind = yield* cursors.behind
    for (const company of behind) recovering.add(company.companyId)
    for (const company of behind) {
      let after = company.cursor
      while (after < company.head) {
        const page = yield* events.replay(company.companyId, after, Math.min(replayPage, company.head - after))
        if (page.length === 0) break
        yield* Effect.forEach(page, handle, { concurrency: eventsInFlight, discard: true })
        after = Number(page[page.length - 1].seq)
        yield* cursors.advance([{ companyId: company.companyId, seq: after }])
      }
      recovering.delete(company.companyId)
    }
    if (behind.length > 0) yield* Effect.logInfo("automation triggers replayed from the event log", { companies: behind.length })
  })

  const live = Effect.gen(function*() {
    for (const event of yield* PubSub.takeAll(subscription)) {
      const companyId = Number(event.company_id)
      const seq = Number(event.seq)
      const track = trackOf(companyId)
      if (seq > track.seen) track.seen = seq
      if (!index.mayStart(event)) {
        track.dirty = true
        continue
      }
      track.inflight.add(seq)
      yield* slots.take(1)
      yield* handle(event).pipe(
        Effect.ensuring(Effect.andThen(slots.release(1), Effect.sync(() => {
          track.inflight.delete(seq)
          track.dirty = true
        }))),
        Effect.forkIn(scope)
      )
    }
  })

  yield* Effect.forkScoped(Effect.forever(live))
  yield* Effect.forkScoped(recover.pipe(Effect.catchCause((cause) => Effect.logError("automation trigger replay failed", cause))))
  yield* Effect.forkScoped(Effect.forever(
    flush.pipe(
      Effect.catchCause((cause) => Effect.logWarning("automation trigger cursors not saved", cause)),
      Effect.andThen(Effect.sleep(flushEveryMs))
    )
  ))
}))

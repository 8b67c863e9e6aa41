import { Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { TelephonyConfig } from "./Config.ts"
import { type CallEvent, type EndedCall, TelephonyRepo } from "./Repo.ts"

const batch = 100

/** Why a leg that never connected ended, from its final SIP status. */
const refusal = (code: number) => {
  if (code === 486 || code === 600) return "busy"
  if (code === 603) return "declined"
  if (code === 408 || code === 480 || code === 487) return "no_answer"
  if (code === 404 || code === 484 || code === 604) return "not_found"
  return "failed"
}

/**
 * The hang-up cause: who sent the BYE of an answered call (`caller_hangup`, `callee_hangup`, or
 * `timeout` when the dialog expired); for a call never answered, the refusal, prefixed `caller_`
 * when the caller's own phone did not take the click-to-call.
 */
export const hangupCause = (event: Pick<CallEvent, "leg" | "kind" | "sip_code" | "side">) => {
  if (event.kind === "ended") return event.side === "caller" || event.side === "callee" ? `${event.side}_hangup` : "timeout"
  return event.leg === "caller" ? `caller_${refusal(event.sip_code)}` : refusal(event.sip_code)
}

const callPayload = (call: EndedCall, sipCode: number) => ({
  call: {
    id: call.id,
    kind: call.kind,
    caller_user_id: call.caller_user_id,
    callee_user_id: call.callee_user_id,
    extension: call.extension,
    number: call.number,
    contact_id: call.contact_id,
    created_at: call.created_at.toISOString(),
    answered_at: call.answered_at?.toISOString() ?? null,
    ended_at: call.ended_at.toISOString(),
    duration_seconds: call.duration_seconds,
    hangup_cause: call.hangup_cause,
    sip_code: sipCode
  },
  ...(call.caller_user_id === null ? {} : { user_id: call.caller_user_id })
})

/**
 * One sweep of the dialog events Kamailio reported: each is folded into its call attempt and
 * deleted in the same transaction as the `call.ended` event the end emits (on the caller's user
 * channel), so an outcome is applied once and never lost. Returns how many were claimed.
 */
export const sweepCallEvents = Effect.gen(function*() {
  const repo = yield* TelephonyRepo
  const events = yield* Events
  const sql = yield* SqlClient.SqlClient
  let total = 0
  while (true) {
    const claimed = yield* Effect.gen(function*() {
      const rows = yield* repo.claimCallEvents(batch)
      for (const row of rows) {
        const companyId = CompanyId.make(row.company_id)
        if (row.kind === "answered") {
          yield* repo.recordAnswered(companyId, row.attempt_id, row.at)
          continue
        }
        const ended = yield* repo.recordEnd(companyId, row.attempt_id, row.at, hangupCause(row))
        if (ended._tag === "Some") yield* events.emit(companyId, "call.ended", callPayload(ended.value, row.sip_code))
      }
      return rows.length
    }).pipe(sql.withTransaction, Effect.orDie)
    total += claimed
    if (claimed < batch) return total
  }
}).pipe(Effect.withSpan("CallOutcomes.sweep"))

/**
 * The call-outcome feed (PBX=kamailio): a sweep every CALL_EVENTS_POLL_MS on every runner (claims
 * skip each other's rows), and the hourly clean-up of events that never found their call.
 */
export const CallOutcomesLayer = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* TelephonyConfig
  if (config.pbx !== "kamailio") return
  const repo = yield* TelephonyRepo
  const interval = Duration.millis(config.callEventsPollMs)
  yield* Effect.forkScoped(Effect.forever(
    sweepCallEvents.pipe(
      Effect.catchCause((cause) => Effect.logWarning("call outcome sweep failed", cause)),
      Effect.andThen(Effect.sleep(interval))
    )
  ))
  yield* Effect.forkScoped(Effect.forever(
    repo.dropOrphanCallEvents.pipe(
      Effect.catchCause((cause) => Effect.logWarning("call event clean-up failed", cause)),
      Effect.andThen(Effect.sleep(Duration.hours(1)))
    )
  ))
})).pipe(Layer.provide([TelephonyRepo.layer, TelephonyConfig.layer]))

import { Effect, Layer, Predicate, PubSub } from "effect"
import { CredentialCache } from "../auth/Credentials.ts"
import type { EventEnvelope } from "../events/Domain.ts"
import { Events } from "../events/Events.ts"
import { companyChannel, userChannel } from "./Domain.ts"
import { RealtimeGateway } from "./Gateway.ts"

const intField = (data: unknown, field: string): number | undefined => {
  if (!Predicate.isObject(data) || !(field in data)) return undefined
  const value = (data as Record<string, unknown>)[field]
  return Predicate.isNumber(value) && Number.isSafeInteger(value) ? value : undefined
}

/**
 * Forwards every committed event (from this runner or, through LISTEN/NOTIFY, from the others)
 * to the sockets connected here. Events only reach the bus after commit, so a rolled-back
 * write never reaches a socket.
 */
export const DispatcherLayer = Layer.effectDiscard(Effect.gen(function*() {
  const events = yield* Events
  const gateway = yield* RealtimeGateway
  // Subscribed while the layer builds, so nothing committed after startup is missed.
  const subscription = yield* events.subscribe
  const dispatch = Effect.fnUntraced(function*(event: EventEnvelope) {
    yield* gateway.publish(companyChannel(event.company_id), event.event, event)
    // The removed member hears of its removal, then nothing more of the company.
    const removed = event.event === "member.removed" ? intField(event.data, "id") : undefined
    if (removed !== undefined) yield* gateway.revoke(companyChannel(event.company_id), removed)
    const userId = intField(event.data, "user_id")
    if (userId !== undefined) yield* gateway.publish(userChannel(userId), event.event, event)
  })
  yield* Effect.forkScoped(Effect.forever(
    PubSub.take(subscription).pipe(
      Effect.flatMap(dispatch),
      Effect.catchCause((cause) => Effect.logWarning("realtime dispatch failed", cause))
    )
  ))
  // A revoked credential (token, password change) ends the subscriptions it was granted, like a removed member's.
  const revocations = yield* (yield* CredentialCache).revocations
  yield* Effect.forkScoped(Effect.forever(
    PubSub.take(revocations).pipe(
      Effect.flatMap(({ companyIds, userId }) =>
        Effect.forEach([...companyIds.map(companyChannel), userChannel(userId)], (channel) => gateway.revoke(channel, userId), {
          discard: true
        })
      ),
      Effect.catchCause((cause) => Effect.logWarning("realtime revocation failed", cause))
    )
  ))
}))

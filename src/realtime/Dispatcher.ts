import { Effect, Layer, Predicate, PubSub } from "effect"
import type { EventEnvelope } from "../events/Domain.ts"
import { Events } from "../events/Events.ts"
import { companyChannel, userChannel } from "./Domain.ts"
import { RealtimeGateway } from "./Gateway.ts"

const userIdOf = (data: unknown): number | undefined =>
  Predicate.isObject(data) && "user_id" in data && Predicate.isNumber(data.user_id) && Number.isSafeInteger(data.user_id)
    ? data.user_id
    : undefined

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
    const userId = userIdOf(event.data)
    if (userId !== undefined) yield* gateway.publish(userChannel(userId), event.event, event)
  })
  yield* Effect.forkScoped(Effect.forever(
    PubSub.take(subscription).pipe(
      Effect.flatMap(dispatch),
      Effect.catchCause((cause) => Effect.logWarning("realtime dispatch failed", cause))
    )
  ))
}))

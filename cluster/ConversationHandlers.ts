import { Effect, Layer, Semaphore } from "effect"
import { Rpc } from "effect/rpc"
import { SendRefusal } from "../src/messages/SendLane.ts"
import { Sender } from "../src/messages/Sender.ts"
import { Conversation } from "./Conversation.ts"

export const ConversationLayer = Conversation.toLayer(
  Effect.gen(function*() {
    const sender = yield* Sender
    const lane = yield* Semaphore.make(1)
    const inFlight = new Set<string>()
    return Conversation.of({
      // Forked so that a duplicate of a key that is still being sent is refused at once
      // instead of queueing behind it; the lane keeps the sends themselves one at a time, in order.
      Send: ({ payload }) =>
        Rpc.fork(Effect.suspend(() => {
          const key = payload.idempotency === null ? null : `${payload.userId}\u0000${payload.endpoint}\u0000${payload.idempotency.key}`
          if (key === null) return lane.withPermit(sender.execute(payload))
          if (inFlight.has(key)) return Effect.fail(SendRefusal.keyInFlight())
          inFlight.add(key)
          return lane.withPermit(sender.execute(payload)).pipe(Effect.ensuring(Effect.sync(() => inFlight.delete(key))))
        }))
    })
  }),
  // A defect (a statement the database rejects, a bug) fails only the send it happened in: it is answered
  // to that caller, and the entity keeps serving the conversation instead of restarting and replaying it.
  { maxIdleTime: "5 minutes", concurrency: 1, mailboxCapacity: "unbounded", disableFatalDefects: true }
)

export const ConversationEntities = Layer.mergeAll(ConversationLayer)

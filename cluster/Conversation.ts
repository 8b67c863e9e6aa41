import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { Message } from "../src/messages/Domain.ts"
import { SendRefusal, SendRequest } from "../src/messages/SendLane.ts"

export const Send = Rpc.make("Send", {
  payload: SendRequest,
  success: Message,
  error: SendRefusal
})

/**
 * One per conversation (entity id = conversation id): owns the order of its outbound sends and the
 * idempotency of keys that are in flight.
 */
export const Conversation = Entity.make("Conversation", [Send])

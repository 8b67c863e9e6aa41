import { Result } from "effect"
import type { ChannelType } from "../providers/Domain.ts"
import { windowClosed, windowRefusal } from "../providers/Rules.ts"
import { blockedMessage, carries } from "./Rules.ts"
import { SendRefusal, type SendRefusalReason } from "./SendLane.ts"

/**
 * What the sending rules read of the thread a send goes to. A forward to a contact account that has
 * no thread on the channel yet passes the account's view: no group, no inbound, the account's id.
 */
export interface RuleThread {
  readonly channel_type: ChannelType
  readonly channel_status: "connected" | "disconnected"
  readonly is_group: boolean
  readonly contact_blocked: boolean
  readonly last_inbound_at: Date | null
  readonly external_thread_id: string | null
  readonly account_external_id: string | null
}

/** What the sending rules read of the content. */
export interface RuleContent {
  /** A forward copies a source message; its refusals name the target and use the forward texts. */
  readonly forward: boolean
  /** The types the channel must carry: the attachments' of a new message, the source message's of a forward. */
  readonly types: ReadonlyArray<string>
  /** An approved template: what the customer-service window leaves open. */
  readonly template: boolean
}

const refuse = (reason: SendRefusalReason, error_code: string, message: string) =>
  Result.fail(new SendRefusal({ reason, message, error_code }))

/**
 * The sending rules of every send, whichever door it takes: the channel connected, a comment thread
 * taking replies but not forwards, content the channel carries, the contact not blocked, the
 * customer-service window (templates excepted), and someone to send to. Ok is the provider's recipient.
 */
export const checkSend = (thread: RuleThread, content: RuleContent, nowMs: number): Result.Result<string, SendRefusal> => {
  const { forward } = content
  if (thread.channel_status !== "connected") {
    return refuse("channel_not_connected", "channel_not_connected", forward ? "The target channel is not connected." : "The channel is not connected.")
  }
  if (forward && thread.is_group) {
    return refuse("channel_not_textable", "channel_not_textable", "The target is a comment thread; it takes replies, not forwarded messages.")
  }
  const uncarried = content.types.find((type) => !carries[thread.channel_type].has(type))
  if (uncarried !== undefined) {
    return refuse(
      "content_type_unsupported",
      "content_type_unsupported",
      `A ${thread.channel_type} channel cannot carry a ${uncarried} ${forward ? "message" : "attachment"}.`
    )
  }
  if (thread.contact_blocked) return refuse("contact_blocked", "contact_blocked", blockedMessage)
  const closed = content.template ? null : windowClosed(thread.channel_type, thread.is_group, thread.last_inbound_at, nowMs)
  if (closed !== null) {
    const refusal = windowRefusal(thread.channel_type, closed, forward)
    return refuse("window_closed", refusal.error_code, refusal.message)
  }
  const recipient = thread.external_thread_id ?? thread.account_external_id
  if (recipient === null) return refuse("no_recipient", "no_recipient", "The thread has no recipient on the channel.")
  return Result.succeed(recipient)
}

import { Option } from "effect"
import type { Credentials } from "../providers/Credentials.ts"
import { type ChannelContext, type ChannelType, channelRules } from "../providers/Provider.ts"
import type { Message } from "./Domain.ts"

export const blockedMessage = "This contact is blocked; the message was not sent."

/** What a channel row must carry to reach its adapter. */
export interface ChannelRef {
  readonly id: number
  readonly type: ChannelType
  readonly provider: ChannelContext["provider"]
  readonly status: ChannelContext["status"]
  readonly credentials: Uint8Array | null
  readonly settings: Record<string, unknown>
}

/** The channel as an adapter sees it; credentials that no longer decrypt count as none. */
export const channelContext = (credentials: Credentials["Service"], companyId: number, row: ChannelRef): ChannelContext => ({
  id: row.id,
  companyId,
  type: row.type,
  provider: row.provider,
  status: row.status,
  credentials: row.credentials === null ? {} : Option.getOrElse(credentials.decrypt(companyId, row.credentials), () => ({})),
  settings: row.settings ?? {}
})

/**
 * Free-form sends on a channel with a customer-service window (msgr_a_business 24 h, msgr_c_business
 * 7 days) need an inbound message on that thread within the window. Comment threads are public
 * replies and have no window.
 */
export const windowClosed = (
  type: ChannelType,
  isGroup: boolean,
  lastInboundAt: Date | null,
  nowMs: number
): number | null => {
  const hours = channelRules[type].customerWindowHours
  if (hours === null || isGroup) return null
  if (lastInboundAt !== null && lastInboundAt.getTime() > nowMs - hours * 3_600_000) return null
  return hours
}

export const windowRefusal = (type: ChannelType, hours: number, forward: boolean) => {
  if (forward) {
    return {
      error_code: "wa_window_closed",
      message: `The ${hours}-hour customer service window of the target thread is closed; the message cannot be forwarded.`
    }
  }
  if (type === "msgr_a_business") {
    return {
      error_code: "template_required",
      message: "The 24-hour customer service window is closed: no inbound message in the last 24 hours. Send an approved template instead."
    }
  }
  return {
    error_code: "messaging_window_closed",
    message: `The ${hours}-hour messaging window is closed: no inbound message from the contact within it.`
  }
}

/** `message.type` repeats the canonical `message_type` (spec: Events). */
export const messagePayload = (message: Message) => ({ ...message, type: message.message_type })

export const createdPayload = (message: Message) => ({
  message: messagePayload(message),
  conversation_id: message.conversation_id,
  thread_id: message.thread_id,
  channel_id: message.channel_id,
  type: message.message_type,
  referral: message.referral
})

export type Change = "status" | "edited" | "deleted" | "revoked" | "attachments"

export const updatedPayload = (message: Message, change: Change) => ({
  message: messagePayload(message),
  conversation_id: message.conversation_id,
  thread_id: message.thread_id,
  channel_id: message.channel_id,
  type: message.message_type,
  change
})

export const defaultStopWords = ["stop", "unsubscribe", "стоп", "отписаться"]

export const isStopWord = (words: ReadonlySet<string>, text: string | null) =>
  text !== null && words.has(text.trim().toLowerCase())

const referralFields: Record<string, ReadonlyArray<string>> = {
  msgr_a: ["source_type", "source_id", "headline", "image_url", "video_url", "source_url", "body", "ctwa_clid", "media_type"],
  msgr_a_business: ["source_type", "source_id", "headline", "image_url", "video_url", "source_url", "body", "ctwa_clid", "media_type"],
  msgr_c_business: ["source_type", "source_id", "headline", "image_url", "video_url", "post_id", "ref"]
}

/** The ad attribution object with only the fields the spec lists for the channel; null where referrals do not exist. */
export const referralFor = (type: ChannelType, referral: Record<string, unknown> | null): Record<string, unknown> | null => {
  const fields = referralFields[type]
  if (fields === undefined || referral === null) return null
  const out: Record<string, unknown> = {}
  for (const field of fields) {
    const value = referral[field]
    if (typeof value === "string" || value === null) out[field] = value
  }
  return Object.keys(out).length === 0 ? null : out
}

/** Order of delivery states: a late `delivered` never overwrites `read`; `failed` always wins. */
const rank: Record<string, number> = { pending: 0, sent: 1, delivered: 2, read: 3 }
export const advances = (current: string | null, next: string) =>
  next === "failed" || current === null || (rank[next] ?? 0) >= (rank[current] ?? 0)

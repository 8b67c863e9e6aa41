import { Option } from "effect"
import type { Credentials } from "./Credentials.ts"
import { channelRules, type ChannelType } from "./Domain.ts"
import type { ChannelContext } from "./Provider.ts"

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
  const since = windowOpenSince(type, isGroup, nowMs)
  if (since === null) return null
  if (lastInboundAt !== null && lastInboundAt.getTime() > since) return null
  return channelRules[type].customerWindowHours
}

/**
 * The window of `windowClosed` as a bound: the window is open when the last inbound message is later
 * than this (ms); null when the thread has no window. SQL that counts many threads compares with it.
 */
export const windowOpenSince = (type: ChannelType, isGroup: boolean, nowMs: number): number | null => {
  const hours = channelRules[type].customerWindowHours
  return hours === null || isGroup ? null : nowMs - hours * 3_600_000
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

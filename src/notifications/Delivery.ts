import { Option } from "effect"
import {
  type CategoryKey,
  type ChannelKey,
  defaultPushTriggers,
  fixedCategories,
  type PushTriggerKey
} from "./Domain.ts"

/**
 * Preferences as the sender may hold them: the full snapshot, or a stored document with
 * keys missing (a missing channel counts as on, a missing trigger takes its default).
 */
export interface DeliveryPreferences {
  readonly channels?: Partial<Record<ChannelKey, boolean>>
  readonly categories?: Partial<Record<CategoryKey, { readonly enabled?: boolean } | undefined>>
  readonly push_triggers?: Partial<Record<PushTriggerKey, boolean>>
  readonly quiet_hours?: {
    readonly enabled?: boolean
    readonly start?: string | null
    readonly end?: string | null
  }
}

export interface Notification {
  readonly kind: ChannelKey
  /** Push notifications name the event that caused them. */
  readonly trigger?: PushTriggerKey
  readonly category?: CategoryKey
  /** IANA zone of the recipient; an unknown zone is read as UTC. */
  readonly userTimezone: string
  readonly now: Date
}

export type DeliveryReason =
  | "call_incoming"
  | "transactional"
  | "channel_disabled"
  | "category_disabled"
  | "trigger_disabled"
  | "quiet_hours"
  | "allowed"

export interface DeliveryDecision {
  readonly deliver: boolean
  readonly reason: DeliveryReason
}

const clockTime = /^([01]\d|2[0-3]):([0-5]\d)$/

const minutesOf = (value: string | null | undefined): Option.Option<number> => {
  const match = value == null ? null : clockTime.exec(value)
  return match === null ? Option.none() : Option.some(Number(match[1]) * 60 + Number(match[2]))
}

const formatters = new Map<string, Intl.DateTimeFormat>()
const makeFormatter = Option.liftThrowable((timeZone: string) =>
  new Intl.DateTimeFormat("en-US", { timeZone, hour: "2-digit", minute: "2-digit", hourCycle: "h23" })
)

const formatterFor = (timeZone: string): Intl.DateTimeFormat => {
  const cached = formatters.get(timeZone)
  if (cached !== undefined) return cached
  const made = Option.getOrElse(makeFormatter(timeZone), () => formatterFor("UTC"))
  if (formatters.size < 1000) formatters.set(timeZone, made)
  return made
}

/** Minutes since local midnight of `now` in `timeZone`. */
export const localMinutes = (now: Date, timeZone: string): number => {
  let hour = 0
  let minute = 0
  for (const part of formatterFor(timeZone).formatToParts(now)) {
    if (part.type === "hour") hour = Number(part.value) % 24
    if (part.type === "minute") minute = Number(part.value)
  }
  return hour * 60 + minute
}

/**
 * Whether quiet hours cover `now` in the user's zone. The window is [start, end); when
 * start is later than end it wraps past midnight. Equal start and end is an empty window.
 */
export const inQuietHours = (quiet: DeliveryPreferences["quiet_hours"], timeZone: string, now: Date): boolean => {
  if (quiet?.enabled !== true) return false
  const start = minutesOf(quiet.start)
  const end = minutesOf(quiet.end)
  if (Option.isNone(start) || Option.isNone(end) || start.value === end.value) return false
  const at = localMinutes(now, timeZone)
  return start.value < end.value
    ? at >= start.value && at < end.value
    : at >= start.value || at < end.value
}

const decision = (deliver: boolean, reason: DeliveryReason): DeliveryDecision => ({ deliver, reason })

/**
 * The one rule deciding whether a notification reaches a user, with the reason.
 * Order matters: the two unconditional cases come before any switch.
 */
export const decideDelivery = (prefs: DeliveryPreferences, notification: Notification): DeliveryDecision => {
  const { category, kind, trigger } = notification
  // An incoming call is useless later: delivered whatever the switches and the hour.
  if (kind === "push" && trigger === "call_incoming") return decision(true, "call_incoming")
  if (category === "transactional") return decision(true, "transactional")
  // The channel switch is honoured for every other category, billing included
  // (`msgr_a=false` is how a user stops billing copies on the messenger).
  if (prefs.channels?.[kind] === false) return decision(false, "channel_disabled")
  if (category !== undefined && !fixedCategories.has(category) && prefs.categories?.[category]?.enabled === false) {
    return decision(false, "category_disabled")
  }
  if (kind === "push") {
    if (trigger !== undefined && (prefs.push_triggers?.[trigger] ?? defaultPushTriggers[trigger]) === false) {
      return decision(false, "trigger_disabled")
    }
    // Quiet hours silence pushes only; mail and messenger copies wait in the inbox anyway.
    if (inQuietHours(prefs.quiet_hours, notification.userTimezone, notification.now)) {
      return decision(false, "quiet_hours")
    }
  }
  return decision(true, "allowed")
}

export const shouldDeliver = (prefs: DeliveryPreferences, notification: Notification): boolean =>
  decideDelivery(prefs, notification).deliver

import { Option } from "effect"
import rrule from "rrule"

/**
 * The next occurrence of an RFC 5545 RRULE strictly after `after` (null when the rule has
 * ended). The rule's DTSTART, when it has none, is `anchor`; `timezone` is its TZID.
 */
export const nextOccurrence = (rule: string, timezone: string, anchor: Date, after: Date): Option.Option<Date> => {
  const parsed = parse(rule, timezone, anchor)
  if (Option.isNone(parsed)) return Option.none()
  return Option.fromNullishOr(parsed.value.after(after, false))
}

export const parse = (rule: string, timezone: string, anchor: Date) => {
  try {
    const text = /^(DTSTART|RRULE:)/m.test(rule) ? rule : `RRULE:${rule}`
    return Option.some(rrule.rrulestr(text, { dtstart: new Date(Math.floor(anchor.getTime() / 1000) * 1000), tzid: timezone === "UTC" ? null : timezone, forceset: false }) as rrule.RRule)
  } catch {
    return Option.none()
  }
}

export const validTimezone = (zone: string) => {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: zone })
    return true
  } catch {
    return false
  }
}

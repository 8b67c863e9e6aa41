import { Option } from "effect"
import rrule from "rrule"

/**
 * The next occurrence of an RFC 5545 RRULE after `after` (none when the rule has ended). The
 * rule's DTSTART, when it has none, is `anchor` rounded up to a whole second; `timezone` is its TZID.
 */
export const nextOccurrence = (rule: string, timezone: string, anchor: Date, after: Date, inclusive = false): Option.Option<Date> => {
  const parsed = parse(rule, timezone, anchor)
  if (Option.isNone(parsed)) return Option.none()
  return Option.fromNullishOr(parsed.value.after(after, inclusive))
}

export const parse = (rule: string, timezone: string, anchor: Date) => {
  try {
    const text = /^(DTSTART|RRULE:)/m.test(rule) ? rule : `RRULE:${rule}`
    return Option.some(rrule.rrulestr(text, { dtstart: new Date(Math.ceil(anchor.getTime() / 1000) * 1000), tzid: timezone === "UTC" ? null : timezone, forceset: false }) as rrule.RRule)
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

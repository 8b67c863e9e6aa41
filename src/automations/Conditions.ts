import { Effect } from "effect"
import type { Condition } from "./Domain.ts"

/** What conditions read; the costly facts are effects, asked for only when a condition needs them. */
export interface Facts {
  readonly text: string | null
  readonly messageType: string | null
  readonly isFirstMessage: Effect.Effect<boolean>
  readonly tagIds: Effect.Effect<ReadonlySet<number>>
  contactField(field: string): Effect.Effect<string | null>
  readonly dealStageId: Effect.Effect<number | null>
  /** A value by dotted path over `{trigger, steps}` (condition nodes: `field` picks what a text condition reads). */
  path(field: string): unknown
}

const matchLimit = 4096
const patterns = new Map<string, RegExp>()
const regexOf = (pattern: string) => {
  let re = patterns.get(pattern)
  if (re === undefined) {
    re = new RegExp(pattern, "iu")
    if (patterns.size > 10_000) patterns.clear()
    patterns.set(pattern, re)
  }
  return re
}

const norm = (s: string) => s.trim().toLowerCase()

const asText = (value: unknown): string | null =>
  value === null || value === undefined ? null : typeof value === "string" ? value : typeof value === "object" ? JSON.stringify(value) : String(value)

/** Text conditions read the message text, or (with `field` on a condition node) the value at that path. */
const textOf = (c: Condition, facts: Facts, byPath: boolean) => (byPath && c.field !== undefined ? asText(facts.path(c.field)) : facts.text)

export const holds = (c: Condition, facts: Facts, byPath = false): Effect.Effect<boolean> => {
  const value = c.value === undefined || c.value === null ? "" : String(c.value)
  switch (c.type) {
    case "text_contains": {
      const text = textOf(c, facts, byPath)
      return Effect.succeed(text !== null && text.toLowerCase().includes(value.toLowerCase()))
    }
    case "text_equals": {
      const text = textOf(c, facts, byPath)
      return Effect.succeed(text !== null && norm(text) === norm(value))
    }
    case "text_matches": {
      const text = textOf(c, facts, byPath)
      return Effect.succeed(text !== null && regexOf(value).test(text.slice(0, matchLimit)))
    }
    case "message_type":
      return Effect.succeed(facts.messageType !== null && norm(facts.messageType) === norm(value))
    case "is_first_message":
      return Effect.map(facts.isFirstMessage, (first) => first === !(value === "false" || value === "0"))
    case "has_tag":
      return Effect.map(facts.tagIds, (tags) => tags.has(Number(value)))
    case "contact_field_equals":
      return Effect.map(facts.contactField(c.field ?? ""), (v) => v !== null && norm(v) === norm(value))
    case "deal_stage_is":
      return Effect.map(facts.dealStageId, (stage) => stage !== null && stage === Number(value))
  }
}

/** Text and type of one event, lowered once for every trigger that reads them. */
export interface EventText {
  readonly text: string | null
  readonly lower: string | null
  readonly trimmed: string | null
  readonly messageType: string | null
}

export const eventText = (text: string | null, messageType: string | null): EventText => ({
  text,
  lower: text === null ? null : text.toLowerCase(),
  trimmed: text === null ? null : norm(text),
  messageType: messageType === null ? null : norm(messageType)
})

/**
 * A trigger's conditions compiled once (needles lowered, patterns built) into their verdict from the
 * event alone, or undefined when a condition needs a fact read from the database: the hot path of
 * evaluation allocates no effect.
 */
export const compileVerdict = (conditions: ReadonlyArray<Condition> | undefined, joiner: "and" | "or" | undefined) => {
  if (conditions === undefined || conditions.length === 0) return (_: EventText): boolean | undefined => true
  const any = joiner === "or"
  const tests = conditions.map((c): (e: EventText) => boolean | undefined => {
    const value = c.value === undefined || c.value === null ? "" : String(c.value)
    switch (c.type) {
      case "text_contains": {
        const needle = value.toLowerCase()
        return (e) => e.lower !== null && e.lower.includes(needle)
      }
      case "text_equals": {
        const wanted = norm(value)
        return (e) => e.trimmed !== null && e.trimmed === wanted
      }
      case "text_matches": {
        const re = regexOf(value)
        return (e) => e.text !== null && re.test(e.text.slice(0, matchLimit))
      }
      case "message_type": {
        const wanted = norm(value)
        return (e) => e.messageType !== null && e.messageType === wanted
      }
      default:
        return () => undefined
    }
  })
  return (e: EventText): boolean | undefined => {
    let open = false
    for (const test of tests) {
      const v = test(e)
      if (v === undefined) open = true
      else if (v === any) return any
    }
    return open ? undefined : !any
  }
}

/** `and` stops at the first false condition, `or` at the first true one; no conditions hold. */
export const evaluate = (
  conditions: ReadonlyArray<Condition> | undefined,
  joiner: "and" | "or" | undefined,
  facts: Facts,
  byPath = false
): Effect.Effect<boolean> => {
  if (conditions === undefined || conditions.length === 0) return Effect.succeed(true)
  const any = joiner === "or"
  return Effect.suspend(() => {
    let i = 0
    const next: Effect.Effect<boolean> = Effect.suspend(() => {
      if (i >= conditions.length) return Effect.succeed(!any)
      return Effect.flatMap(holds(conditions[i++], facts, byPath), (ok) => (ok === any ? Effect.succeed(any) : next))
    })
    return next
  })
}

import { groupsOf, type Rule } from "./Compiler.ts"
import type { GroupLogic } from "./Domain.ts"

export interface Names {
  readonly tags: ReadonlyMap<number, string>
  readonly channels: ReadonlyMap<number, string>
}

const listOf = (ids: ReadonlyArray<number>, names: ReadonlyMap<number, string>) => {
  const shown = ids.slice(0, 3).map((id) => names.get(id) ?? `#${id}`)
  const more = ids.length - shown.length
  return more > 0 ? `${shown.join(", ")} and ${more} more` : shown.join(", ")
}

const dateLabels = {
  created_at: "was created",
  last_message_at: "last message",
  last_inbound_at: "last inbound message"
} as const

const fieldLabel = (name: string) => name.replace(/_/g, " ")

const textPhrase = (label: string, operator: string, value: string | null) => {
  switch (operator) {
    case "is":
      return `${label} is "${value}"`
    case "is_not":
      return `${label} is not "${value}"`
    case "contains":
      return `${label} contains "${value}"`
    case "starts_with":
      return `${label} starts with "${value}"`
    case "is_empty":
      return `${label} is empty`
    default:
      return `${label} is not empty`
  }
}

const phrase = (rule: Rule, names: Names): string => {
  switch (rule.type) {
    case "tag": {
      const verb = { has_any: "has any of the tags", has_all: "has all of the tags", has_none: "has none of the tags" }[rule.operator]
      return `${verb} ${listOf(rule.ids, names.tags)}`
    }
    case "channel": {
      const noun = rule.ids.length === 1 ? "channel" : "one of the channels"
      return `${rule.operator === "in" ? "is" : "is not"} on ${noun} ${listOf(rule.ids, names.channels)}`
    }
    case "status": {
      const state = { opted_out: "opted out", blocked: "blocked", active: "active (neither opted out nor blocked)" }[rule.value]
      return `${rule.operator === "is" ? "is" : "is not"} ${state}`
    }
    case "date": {
      const label = dateLabels[rule.field]
      const value = rule.condition.value
      switch (rule.condition.operator) {
        case "before":
          return `${label} before ${value}`
        case "after":
          return `${label} after ${value}`
        case "between":
          return `${label} between ${(value as ReadonlyArray<string>)[0]} and ${(value as ReadonlyArray<string>)[1]}`
        case "within_last_days":
          return `${label} within the last ${value} days`
        default:
          return `${label} not within the last ${value} days`
      }
    }
    case "field":
      return textPhrase(fieldLabel(rule.field), rule.operator, rule.value)
    case "custom":
      return textPhrase(`custom field ${rule.key}`, rule.operator, rule.value)
    case "activity":
      return rule.operator === "has_conversation"
        ? (rule.value ? "has a conversation" : "has no conversation")
        : rule.operator === "replied_within_days"
        ? `replied within the last ${rule.days} days`
        : `has not replied within the last ${rule.days} days`
  }
}

const sentence = (body: string) => `${body.replace(/\p{L}/u, (letter) => letter.toUpperCase())}.`

/** A short human sentence: conditions of a group joined by "and", groups by the group logic. */
export const summarize = (rules: ReadonlyArray<Rule>, groupLogic: GroupLogic, names: Names): string => {
  if (rules.length === 0) return "All contacts."
  const groups = groupsOf(rules).map((group) => group.map((rule) => phrase(rule, names)))
  if (groups.length === 1) return sentence(groups[0].join(" and "))
  return sentence(groups.map((parts) => (parts.length > 1 ? `(${parts.join(" and ")})` : parts[0])).join(` ${groupLogic} `))
}

export const staticSummary = (count: number) => `Static list of ${count} contact${count === 1 ? "" : "s"}.`

import { Clock, DateTime, Effect, Option, Predicate } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { customFieldKey } from "../platform/FreeForm.ts"
import type { Condition, ConditionInput, GroupLogic } from "./Domain.ts"
import { likeEscape } from "../platform/Sql.ts"

// ---------------------------------------------------------------- rules

export const TagOperators = ["has_any", "has_all", "has_none"] as const
export const ChannelOperators = ["in", "not_in"] as const
export const StatusOperators = ["is", "is_not"] as const
export const StatusValues = ["opted_out", "blocked", "active"] as const
export const DateFields = ["created_at", "last_message_at", "last_inbound_at"] as const
export const DateOperators = ["before", "after", "between", "within_last_days", "not_within_last_days"] as const
export const TextOperators = ["is", "is_not", "contains", "starts_with", "is_empty", "is_not_empty"] as const
export const ContactFields = ["first_name", "last_name", "display_name", "company_name", "phone", "email"] as const
export const ActivityOperators = ["has_conversation", "replied_within_days", "no_reply_within_days"] as const
export const ConditionTypes = ["tag", "channel", "status", "date", "field", "custom", "activity"] as const

export type TextOperator = typeof TextOperators[number]
export type ContactField = typeof ContactFields[number]
export type DateField = typeof DateFields[number]

/** An instant bound; `day` when the client gave a calendar date (a whole UTC day). */
export interface Bound {
  readonly at: Date
  readonly inclusive: boolean
}

/** A condition checked and typed; `condition` is its normalized wire form (what is stored). */
export type Rule =
  & { readonly condition: Condition }
  & (
    | { readonly type: "tag"; readonly operator: typeof TagOperators[number]; readonly ids: ReadonlyArray<number> }
    | { readonly type: "channel"; readonly operator: typeof ChannelOperators[number]; readonly ids: ReadonlyArray<number> }
    | { readonly type: "status"; readonly operator: typeof StatusOperators[number]; readonly value: typeof StatusValues[number] }
    | {
      readonly type: "date"
      readonly field: DateField
      /** Fixed bounds (`before`, `after`, `between`) or days back from now (`*within_last_days`). */
      readonly range:
        | { readonly _tag: "Fixed"; readonly lower: Bound | null; readonly upper: Bound | null }
        | { readonly _tag: "Recent"; readonly days: number; readonly negate: boolean }
    }
    | { readonly type: "field"; readonly field: ContactField; readonly operator: TextOperator; readonly value: string | null }
    | { readonly type: "custom"; readonly key: string; readonly operator: TextOperator; readonly value: string | null }
    | { readonly type: "activity"; readonly operator: "has_conversation"; readonly value: boolean }
    | { readonly type: "activity"; readonly operator: "replied_within_days" | "no_reply_within_days"; readonly days: number }
  )

/** What a segment selects: conditions joined per group, or an explicit member list. */
export type Definition =
  | { readonly type: "dynamic"; readonly groupLogic: GroupLogic; readonly rules: ReadonlyArray<Rule> }
  | { readonly type: "static"; readonly segmentId: number }

export type FieldErrors = Record<string, Array<string>>

const MaxDays = 36_500
const MaxText = 255
const MaxIds = 1000

const isOneOf = <const L extends ReadonlyArray<string>>(list: L, value: unknown): value is L[number] =>
  Predicate.isString(value) && (list as ReadonlyArray<string>).includes(value)

const dateOnly = /^(\d{4})-(\d{2})-(\d{2})$/
const dateTime = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/

/** A calendar date (a whole UTC day) or an ISO 8601 instant with its offset. */
const parseDate = (value: unknown): Option.Option<{ readonly start: Date; readonly end: Date | null }> => {
  if (!Predicate.isString(value)) return Option.none()
  const day = dateOnly.exec(value)
  if (day !== null) {
    const start = DateTime.make({ year: Number(day[1]), month: Number(day[2]), day: Number(day[3]) })
    return Option.flatMap(start, (start) => {
      const utc = DateTime.toUtc(start)
      // DateTime.make rolls 2026-02-30 over to March; a calendar date must round-trip.
      if (DateTime.formatIsoDateUtc(utc) !== value) return Option.none()
      return Option.some({ start: DateTime.toDateUtc(utc), end: DateTime.toDateUtc(DateTime.add(utc, { days: 1 })) })
    })
  }
  if (!dateTime.test(value)) return Option.none()
  return Option.map(DateTime.make(value), (at) => ({ start: DateTime.toDateUtc(at), end: null }))
}

const tagIds = (value: unknown): Option.Option<ReadonlyArray<number>> => {
  const list = Predicate.isNumber(value) ? [value] : value
  if (!Array.isArray(list) || list.length === 0 || list.length > MaxIds) return Option.none()
  if (!list.every((id) => Number.isSafeInteger(id) && id > 0)) return Option.none()
  return Option.some([...new Set(list as Array<number>)])
}

const days = (value: unknown): Option.Option<number> =>
  Number.isSafeInteger(value) && (value as number) >= 1 && (value as number) <= MaxDays ? Option.some(value as number) : Option.none()

const text = (value: unknown): Option.Option<string> => {
  const raw = Predicate.isNumber(value) && Number.isFinite(value) ? String(value) : value
  if (!Predicate.isString(raw) || raw.trim() === "" || raw.length > MaxText) return Option.none()
  return Option.some(raw.trim())
}

/**
 * Checks conditions and types them. Every mistake is reported on `conditions.<i>.<key>` with
 * `key` one of `type`, `operator`, `field_name`, `value`; a condition with a bad type or operator
 * is not checked further.
 */
export const parse = (inputs: ReadonlyArray<ConditionInput>, prefix = "conditions") => {
  const errors: FieldErrors = {}
  const rules: Array<Rule> = []
  inputs.forEach((input, index) => {
    const at = (key: string) => `${prefix}.${index}.${key}`
    const fail = (key: string, message: string) => {
      errors[at(key)] = [message]
    }
    const invalid = (key: string) => fail(key, `The selected ${at(key)} is invalid.`)
    const group = input.group ?? 1
    if (group < 0 || group > 1000) return fail("group", `The ${at("group")} field must be between 0 and 1000.`)
    const wire = (value: unknown, fieldName: string | null = null): Condition => ({
      group,
      type: input.type,
      operator: input.operator,
      value,
      field_name: fieldName
    })
    const { operator, value } = input
    switch (input.type) {
      case "tag":
      case "channel": {
        const operators = input.type === "tag" ? TagOperators : ChannelOperators
        if (!isOneOf(operators, operator)) return invalid("operator")
        const ids = tagIds(value)
        if (Option.isNone(ids)) {
          return fail("value", `The ${at("value")} field must be a list of 1 to ${MaxIds} ${input.type} ids.`)
        }
        return rules.push({ type: input.type, operator, ids: ids.value, condition: wire(ids.value) } as Rule)
      }
      case "status": {
        if (!isOneOf(StatusOperators, operator)) return invalid("operator")
        if (!isOneOf(StatusValues, value)) {
          return fail("value", `The ${at("value")} field must be one of: ${StatusValues.join(", ")}.`)
        }
        return rules.push({ type: "status", operator, value, condition: wire(value) })
      }
      case "date": {
        const field = input.field_name
        if (!isOneOf(DateFields, field)) {
          return fail("field_name", `The ${at("field_name")} field must be one of: ${DateFields.join(", ")}.`)
        }
        if (!isOneOf(DateOperators, operator)) return invalid("operator")
        if (operator === "within_last_days" || operator === "not_within_last_days") {
          const n = days(value)
          if (Option.isNone(n)) return fail("value", `The ${at("value")} field must be a whole number of days from 1 to ${MaxDays}.`)
          return rules.push({
            type: "date",
            field,
            range: { _tag: "Recent", days: n.value, negate: operator === "not_within_last_days" },
            condition: wire(n.value, field)
          })
        }
        if (operator === "between") {
          const pair = Array.isArray(value) && value.length === 2 ? value.map(parseDate).filter(Option.isSome).map((p) => p.value) : []
          if (pair.length !== 2) {
            return fail("value", `The ${at("value")} field must be two dates (YYYY-MM-DD or ISO 8601), from and to.`)
          }
          const [from, to] = pair
          const upper: Bound = to.end !== null ? { at: to.end, inclusive: false } : { at: to.start, inclusive: true }
          if (from.start.getTime() > upper.at.getTime() || (from.start.getTime() === upper.at.getTime() && !upper.inclusive)) {
            return fail("value", `The ${at("value")} dates must be in order: from, then to.`)
          }
          return rules.push({
            type: "date",
            field,
            range: { _tag: "Fixed", lower: { at: from.start, inclusive: true }, upper },
            condition: wire(value, field)
          })
        }
        const date = parseDate(value)
        if (Option.isNone(date)) return fail("value", `The ${at("value")} field must be a date (YYYY-MM-DD or ISO 8601).`)
        const { start, end } = date.value
        return rules.push({
          type: "date",
          field,
          range: operator === "before"
            ? { _tag: "Fixed", lower: null, upper: { at: start, inclusive: false } }
            // After a calendar date means from the next day on; after an instant, strictly later.
            : { _tag: "Fixed", lower: end !== null ? { at: end, inclusive: true } : { at: start, inclusive: false }, upper: null },
          condition: wire(value, field)
        })
      }
      case "field":
      case "custom": {
        let name: string
        if (input.type === "field") {
          if (!isOneOf(ContactFields, input.field_name)) {
            return fail("field_name", `The ${at("field_name")} field must be one of: ${ContactFields.join(", ")}.`)
          }
          name = input.field_name
        } else {
          const key = (input.field_name ?? "").replace(/^custom_fields\./, "")
          if (!customFieldKey.test(key)) {
            return fail("field_name", `The ${at("field_name")} field must be a custom field name (letters, digits, _ . -; up to 64).`)
          }
          name = key
        }
        if (!isOneOf(TextOperators, operator)) return invalid("operator")
        let normalized: string | null = null
        if (operator !== "is_empty" && operator !== "is_not_empty") {
          const t = text(value)
          if (Option.isNone(t)) return fail("value", `The ${at("value")} field must be a non-empty text of at most ${MaxText} characters.`)
          if (name === "phone" && input.type === "field" && !/\d/.test(t.value)) {
            return fail("value", `The ${at("value")} field must contain digits to compare with phone numbers.`)
          }
          normalized = t.value
        }
        return rules.push(
          input.type === "field"
            ? { type: "field", field: name as ContactField, operator, value: normalized, condition: wire(normalized, name) }
            : { type: "custom", key: name, operator, value: normalized, condition: wire(normalized, name) }
        )
      }
      case "activity": {
        if (!isOneOf(ActivityOperators, operator)) return invalid("operator")
        if (operator === "has_conversation") {
          const flag = value === undefined || value === null ? true : value
          if (!Predicate.isBoolean(flag)) return fail("value", `The ${at("value")} field must be true or false.`)
          return rules.push({ type: "activity", operator, value: flag, condition: wire(flag) })
        }
        const n = days(value)
        if (Option.isNone(n)) return fail("value", `The ${at("value")} field must be a whole number of days from 1 to ${MaxDays}.`)
        return rules.push({ type: "activity", operator, days: n.value, condition: wire(n.value) })
      }
      default:
        return invalid("type")
    }
  })
  return Object.keys(errors).length > 0
    ? { _tag: "Invalid" as const, errors }
    : { _tag: "Valid" as const, rules: rules as ReadonlyArray<Rule> }
}

// ---------------------------------------------------------------- SQL

type Sql = Statement.Constructor
type Fragment = Statement.Fragment

/** `%`, `_` and `\` match themselves inside a LIKE pattern (backslash is PostgreSQL's default escape). */

const digits = (value: string) => value.replace(/\D/g, "")

/** A text predicate on one value expression (NULL counts as empty). */
const textOn = (sql: Sql, expr: Fragment, operator: TextOperator, value: string | null, onDigits = false): Fragment => {
  const v = value ?? ""
  switch (operator) {
    case "is":
    case "is_not": {
      const same = onDigits ? sql`${expr} = ${digits(v)}` : sql`lower(${expr}) = lower(${v})`
      return operator === "is" ? same : sql`NOT coalesce(${same}, false)`
    }
    case "contains":
      return onDigits ? sql`${expr} LIKE ${`%${digits(v)}%`}` : sql`lower(${expr}) LIKE lower(${`%${likeEscape(v)}%`})`
    case "starts_with":
      return onDigits ? sql`${expr} LIKE ${`${digits(v)}%`}` : sql`lower(${expr}) LIKE lower(${`${likeEscape(v)}%`})`
    case "is_empty":
      return sql`coalesce(btrim(${expr}), '') = ''`
    case "is_not_empty":
      return sql`coalesce(btrim(${expr}), '') <> ''`
  }
}

/**
 * One contact field. Phones and e-mails are lists: a positive operator holds when one entry
 * matches; `is_not` and `is_empty` hold when none does (so a contact without phones `is_not`
 * any number). Phones compare by their digits.
 */
const fieldOn = (sql: Sql, companyId: CompanyId, field: ContactField, operator: TextOperator, value: string | null): Fragment => {
  if (field !== "phone" && field !== "email") return textOn(sql, sql`c.${sql.literal(field)}`, operator, value)
  const negative = operator === "is_not" || operator === "is_empty"
  const positive: TextOperator = operator === "is_not" ? "is" : operator === "is_empty" ? "is_not_empty" : operator
  const entry = field === "phone"
    ? sql`SELECT 1 FROM contact_phones p WHERE p.company_id = ${companyId} AND p.contact_id = c.id AND ${
      textOn(sql, sql`regexp_replace(p.phone, '[^0-9]', '', 'g')`, positive, value, true)
    }`
    : sql`SELECT 1 FROM contact_emails e WHERE e.company_id = ${companyId} AND e.contact_id = c.id AND ${
      textOn(sql, sql`e.email`, positive, value)
    }`
  return negative ? sql`NOT EXISTS (${entry})` : sql`EXISTS (${entry})`
}

const boundSql = (sql: Sql, ts: Fragment, lower: Bound | null, upper: Bound | null): Fragment =>
  sql.and([
    ...(lower === null ? [] : [lower.inclusive ? sql`${ts} >= ${lower.at}` : sql`${ts} > ${lower.at}`]),
    ...(upper === null ? [] : [upper.inclusive ? sql`${ts} <= ${upper.at}` : sql`${ts} < ${upper.at}`])
  ])

/**
 * Rows carrying one of the contact's times: the contact's conversation for `last_message_at`,
 * its one-to-one threads for `last_inbound_at` (their latest counts).
 */
const timesOf = (sql: Sql, companyId: CompanyId, field: "last_message_at" | "last_inbound_at", where: Fragment): Fragment =>
  field === "last_message_at"
    ? sql`SELECT 1 FROM conversations cv WHERE cv.company_id = ${companyId} AND cv.contact_id = c.id AND ${where}`
    : sql`SELECT 1 FROM conversations cv
          JOIN threads t ON t.conversation_id = cv.id AND t.company_id = ${companyId} AND NOT t.is_group
          WHERE cv.company_id = ${companyId} AND cv.contact_id = c.id AND ${where}`

const dateOn = (sql: Sql, companyId: CompanyId, field: DateField, range: Extract<Rule, { type: "date" }>["range"], now: Date): Fragment => {
  const recent = range._tag === "Recent"
    ? { lower: { at: new globalThis.Date(now.getTime() - range.days * 86_400_000), inclusive: true }, upper: null }
    : range
  if (field === "created_at") {
    const inRange = boundSql(sql, sql`c.created_at`, recent.lower, recent.upper)
    return range._tag === "Recent" && range.negate ? sql`NOT (${inRange})` : inRange
  }
  const ts = field === "last_message_at" ? sql`cv.last_message_at` : sql`t.last_inbound_at`
  // The latest time is in the range: one time is in it and none lies beyond its upper bound.
  const some = sql`EXISTS (${timesOf(sql, companyId, field, boundSql(sql, ts, recent.lower, recent.upper))})`
  if (range._tag === "Recent" && range.negate) return sql`NOT ${some}`
  if (recent.upper === null) return some
  const beyond = recent.upper.inclusive ? sql`${ts} > ${recent.upper.at}` : sql`${ts} >= ${recent.upper.at}`
  return sql`${some} AND NOT EXISTS (${timesOf(sql, companyId, field, beyond)})`
}

const ruleOn = (sql: Sql, companyId: CompanyId, rule: Rule, now: Date): Fragment => {
  switch (rule.type) {
    case "tag": {
      const tagged = (ids: ReadonlyArray<number>) =>
        sql`EXISTS (SELECT 1 FROM contact_tags ct WHERE ct.company_id = ${companyId} AND ct.contact_id = c.id AND ct.tag_id IN ${sql.in(ids)})`
      if (rule.operator === "has_any") return tagged(rule.ids)
      if (rule.operator === "has_none") return sql`NOT ${tagged(rule.ids)}`
      return sql.and(rule.ids.map((id) => tagged([id])))
    }
    case "channel": {
      const on = sql`EXISTS (SELECT 1 FROM conversations cv
        JOIN threads t ON t.conversation_id = cv.id AND t.company_id = ${companyId} AND NOT t.is_group
        WHERE cv.company_id = ${companyId} AND cv.contact_id = c.id AND t.channel_id IN ${sql.in(rule.ids)})`
      return rule.operator === "in" ? on : sql`NOT ${on}`
    }
    case "status": {
      const holds = rule.value === "opted_out"
        ? sql`c.opted_out_at IS NOT NULL`
        : rule.value === "blocked"
        ? sql`c.blocked_at IS NOT NULL`
        : sql`(c.opted_out_at IS NULL AND c.blocked_at IS NULL)`
      return rule.operator === "is" ? holds : sql`NOT ${holds}`
    }
    case "date":
      return dateOn(sql, companyId, rule.field, rule.range, now)
    case "field":
      return fieldOn(sql, companyId, rule.field, rule.operator, rule.value)
    case "custom":
      return textOn(sql, sql`(c.custom_fields ->> ${rule.key})`, rule.operator, rule.value)
    case "activity": {
      if (rule.operator === "has_conversation") {
        const has = sql`EXISTS (SELECT 1 FROM conversations cv
          WHERE cv.company_id = ${companyId} AND cv.contact_id = c.id AND cv.last_message_at IS NOT NULL)`
        return rule.value ? has : sql`NOT ${has}`
      }
      return dateOn(sql, companyId, "last_inbound_at", {
        _tag: "Recent",
        days: rule.days,
        negate: rule.operator === "no_reply_within_days"
      }, now)
    }
  }
}

/** Conditions grouped by `group`, groups in ascending order. */
export const groupsOf = (rules: ReadonlyArray<Rule>): ReadonlyArray<ReadonlyArray<Rule>> => {
  const groups = new Map<number, Array<Rule>>()
  for (const rule of rules) {
    const list = groups.get(rule.condition.group)
    if (list === undefined) groups.set(rule.condition.group, [rule])
    else list.push(rule)
  }
  return [...groups.entries()].sort(([a], [b]) => a - b).map(([, list]) => list)
}

const live = (sql: Sql, companyId: CompanyId) => sql`c.company_id = ${companyId} AND c.deleted_at IS NULL`

/**
 * The AND-lists whose union is the segment: one for a static segment or `and` logic (every
 * condition of every group must hold), one per group for `or` logic.
 */
const branches = (sql: Sql, companyId: CompanyId, definition: Definition, now: Date): ReadonlyArray<Fragment> => {
  if (definition.type === "static") {
    return [sql`${live(sql, companyId)} AND EXISTS (SELECT 1 FROM segment_members m
      WHERE m.segment_id = ${definition.segmentId} AND m.company_id = ${companyId} AND m.contact_id = c.id)`]
  }
  const groups = groupsOf(definition.rules)
  const andOf = (rules: ReadonlyArray<Rule>) => sql.and([live(sql, companyId), ...rules.map((rule) => ruleOn(sql, companyId, rule, now))])
  if (definition.groupLogic === "and" || groups.length <= 1) return [andOf(definition.rules)]
  return groups.map(andOf)
}

/**
 * A predicate on `contacts c` for embedding in a caller's query (`… FROM contacts c WHERE
 * ${where}`): true for the segment's live members of `companyId`.
 */
export const whereOf = (sql: Sql, companyId: CompanyId, definition: Definition, now: Date): Fragment => {
  const list = branches(sql, companyId, definition, now)
  return list.length === 1 ? list[0] : sql.or(list)
}

/**
 * The segment's member ids. Groups joined by `or` become a UNION of one AND-list each: inside an
 * AND-list PostgreSQL turns every EXISTS into a (hash) semi- or anti-join, which an OR would
 * prevent (it would probe every subquery once per contact).
 */
export const idsStatement = (sql: Sql, companyId: CompanyId, definition: Definition, now: Date): Statement.Statement<{ readonly id: number }> =>
  sql<{ readonly id: number }>`${
    sql.join(" UNION ", false)(branches(sql, companyId, definition, now).map((where) => sql`SELECT c.id FROM contacts c WHERE ${where}`))
  }`

/** The number of the segment's members: `[{count}]`. */
export const countStatement = (sql: Sql, companyId: CompanyId, definition: Definition, now: Date): Statement.Statement<{ readonly count: number }> => {
  const list = branches(sql, companyId, definition, now)
  return list.length === 1
    ? sql<{ readonly count: number }>`SELECT count(*)::int AS count FROM contacts c WHERE ${list[0]}`
    : sql<{ readonly count: number }>`SELECT count(*)::int AS count FROM (${idsStatement(sql, companyId, definition, now)}) AS members`
}

const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new globalThis.Date(ms))

/**
 * The segment's member ids of `companyId` as one parameterized statement (for estimate, broadcast
 * audiences and exports). Relative conditions (`within_last_days`, …) are measured from the Clock.
 * Run it with `.unprepared`: the plan must fit this company's sizes, not a generic plan.
 */
export const memberIds = Effect.fnUntraced(function*(companyId: CompanyId, definition: Definition) {
  const sql = yield* SqlClient.SqlClient
  return idsStatement(sql, companyId, definition, yield* nowDate)
})

/** The count of `memberIds` as one statement `[{count}]`. */
export const memberCount = Effect.fnUntraced(function*(companyId: CompanyId, definition: Definition) {
  const sql = yield* SqlClient.SqlClient
  return countStatement(sql, companyId, definition, yield* nowDate)
})

/**
 * The definition of a stored segment, for callers that select its audience (broadcasts, exports).
 * Stored conditions were checked when saved; one that no longer parses is a defect.
 */
export const definitionOf = (segment: {
  readonly id: number
  readonly type: "dynamic" | "static"
  readonly group_logic: GroupLogic
  readonly conditions: ReadonlyArray<Condition>
}): Effect.Effect<Definition> => {
  if (segment.type === "static") return Effect.succeed({ type: "static", segmentId: segment.id })
  const parsed = parse(segment.conditions)
  return parsed._tag === "Invalid"
    ? Effect.die(new Error(`segment ${segment.id} holds conditions that no longer parse: ${JSON.stringify(parsed.errors)}`))
    : Effect.succeed({ type: "dynamic", groupLogic: segment.group_logic, rules: parsed.rules })
}

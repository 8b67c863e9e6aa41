import { Option, Predicate } from "effect"
import { SqlError } from "effect/sql"
import * as Errors from "./Errors.ts"

/**
 * What a client is told when the database refuses a write that the service did not expect to be refused:
 * two requests raced past a check the service made first. The answer is the one the later request would
 * have had if the two had come one after the other (the value is taken, the referenced record is gone),
 * or 409 with `reason: concurrent_write` when the database gave up on one of them (deadlock, serialization)
 * and a retry will go through.
 */
export type SqlRefusal = Errors.Unprocessable | Errors.Conflict

interface PgFields {
  readonly code?: string
  readonly detail?: string
  readonly column?: string
  readonly constraint?: string
  readonly table?: string
}

const text = (cause: unknown, key: keyof PgFields) =>
  Predicate.hasProperty(cause, key) && Predicate.isString(cause[key]) ? cause[key] : undefined

/** The fields PostgreSQL's error carries (SQLSTATE, detail, column, constraint, table), where the driver kept them. */
const pgFields = (cause: unknown): PgFields => ({
  code: text(cause, "code"),
  detail: text(cause, "detail"),
  column: text(cause, "column"),
  constraint: text(cause, "constraint"),
  table: text(cause, "table")
})

/** `lower(name::text)` → `name`; the company and parent ids are the request's scope, not a field the client chose. */
const keyColumns = (detail: string | undefined): Array<string> => {
  const match = detail === undefined ? null : /^Key \((.*?)\)=\(/.exec(detail)
  if (match === null) return []
  return match[1].split(",").map((part) => {
    const bare = part.trim().replace(/::\w+/g, "")
    const inner = /\(([^()]*)\)/.exec(bare)
    return (inner === null ? bare : inner[1]).trim()
  }).filter((column) => column !== "company_id" && column !== "")
}

/** `segments_slug_key` on table `segments` → `slug`; a name that says nothing more gives undefined. */
const constraintColumn = (constraint: string | undefined, table: string | undefined) => {
  if (constraint === undefined) return undefined
  const withoutTable = table !== undefined && constraint.startsWith(`${table}_`) ? constraint.slice(table.length + 1) : constraint
  const column = withoutTable.replace(/_(key|check|fkey|idx|pkey)$/, "")
  return column === "" || column === constraint ? undefined : column
}

const label = (field: string) => field.replace(/_id$/, "").replace(/_/g, " ")

export const concurrentWrite = () =>
  new Errors.Conflict({
    message: "Another request changed the same records at the same moment; retry the request.",
    reason: "concurrent_write"
  })

const uniqueTaken = (fields: PgFields) => {
  const columns = keyColumns(fields.detail)
  const field = columns[columns.length - 1] ?? constraintColumn(fields.constraint, fields.table)
  return field === undefined ? concurrentWrite() : Errors.invalidField(field, `The ${label(field)} has already been taken.`)
}

const foreignKey = (fields: PgFields) => {
  if (fields.detail?.includes("is still referenced") === true) {
    return Errors.ruleViolation("still_referenced", "The record is still in use by other records and cannot be removed.")
  }
  const field = keyColumns(fields.detail)[0] ?? constraintColumn(fields.constraint, fields.table)
  return field === undefined
    ? Errors.ruleViolation("reference_missing", "A record this request refers to no longer exists.")
    : Errors.invalidField(field, `The selected ${label(field)} is invalid.`)
}

const invalidValue = (fields: PgFields, message: (label: string) => string) => {
  const field = fields.column ?? constraintColumn(fields.constraint, fields.table)
  return field === undefined
    ? new Errors.Unprocessable({ message: "The given data was invalid." })
    : Errors.invalidField(field, message(label(field)))
}

/** The answer to a database refusal a request caused, when it is one; connection trouble and bugs are not. */
export const sqlRefusal = (error: unknown): Option.Option<SqlRefusal> => {
  if (!SqlError.isSqlError(error)) return Option.none()
  const reason = error.reason
  const fields = pgFields(reason.cause)
  switch (reason._tag) {
    case "UniqueViolation":
      return Option.some(uniqueTaken(fields))
    case "DeadlockError":
    case "SerializationError":
    case "LockTimeoutError":
      return Option.some(concurrentWrite())
    case "ConstraintError":
      if (fields.code === "23503") return Option.some(foreignKey(fields))
      if (fields.code === "23502") return Option.some(invalidValue(fields, (field) => `The ${field} field is required.`))
      return Option.some(invalidValue(fields, (field) => `The ${field} field has an invalid value.`))
    default:
      return Option.none()
  }
}

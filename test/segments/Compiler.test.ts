import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient, Statement } from "effect/sql"
import { TestClock } from "effect/testing"
import { CompanyId } from "../../src/auth/Domain.ts"
import { countStatement, type Definition, idsStatement, memberCount, parse } from "../../src/segments/Compiler.ts"
import type { ConditionInput, GroupLogic } from "../../src/segments/Domain.ts"
import { summarize } from "../../src/segments/Summary.ts"

// A statement builder with PostgreSQL's compiler and no connection: enough to read the SQL text and its parameters.
const sql = Statement.make(Effect.die("no connection in compiler tests"), PgClient.makeCompiler(), [], undefined)
const company = CompanyId.make(4242)
const now = new Date("2026-06-15T12:00:00.000Z")

const definition = (conditions: ReadonlyArray<ConditionInput>, groupLogic: GroupLogic = "and"): Definition => {
  const parsed = parse(conditions)
  if (parsed._tag === "Invalid") throw new Error(JSON.stringify(parsed.errors))
  return { type: "dynamic", groupLogic, rules: parsed.rules }
}

const hostile = "x'); DROP TABLE contacts; --"

describe("segment compiler", () => {
  it("binds every value as a parameter: no value, key or id appears in the SQL text", () => {
    const [text, params] = countStatement(sql, company, definition([
      { type: "field", operator: "is", value: hostile, field_name: "first_name" },
      { type: "custom", operator: "contains", value: hostile, field_name: "plan" },
      { type: "custom", operator: "is_empty", field_name: "weird.key-1" },
      { type: "tag", operator: "has_any", value: [987654, 987655] },
      { type: "channel", operator: "in", value: [876543] },
      { type: "date", operator: "before", value: "2026-01-31", field_name: "last_inbound_at" }
    ]), now).compile()
    for (const needle of ["DROP", "4242", "987654", "987655", "876543", "weird", "plan", "2026"]) {
      assert.isFalse(text.includes(needle), `${needle} in ${text}`)
    }
    assert.include(params, hostile)
    assert.include(params, `%${hostile}%`)
    assert.include(params, "weird.key-1")
    assert.include(params, 987654)
    assert.include(params, 876543)
    assert.include(params, company)
    assert.isTrue(params.some((p) => p instanceof Date && p.toISOString() === "2026-01-31T00:00:00.000Z"))
    assert.match(text, /^SELECT count\(\*\)::int AS count FROM contacts c WHERE \(?c\.company_id = \$1 AND c\.deleted_at IS NULL/)
  })

  it("escapes LIKE wildcards inside the bound pattern and compares phones by digits", () => {
    const [, params] = idsStatement(sql, company, definition([
      { type: "field", operator: "starts_with", value: "50%_\\", field_name: "display_name" },
      { type: "field", operator: "contains", value: "+7 (916)", field_name: "phone" }
    ]), now).compile()
    assert.include(params, "50\\%\\_\\\\%")
    assert.include(params, "%7916%")
  })

  it("measures relative days from the given time, and a calendar date as a whole UTC day", () => {
    const [, recent] = countStatement(sql, company, definition([
      { type: "date", operator: "within_last_days", value: 30, field_name: "last_message_at" }
    ]), now).compile()
    assert.isTrue(recent.some((p) => p instanceof Date && p.toISOString() === "2026-05-16T12:00:00.000Z"))
    const [text, between] = countStatement(sql, company, definition([
      { type: "date", operator: "between", value: ["2026-01-01", "2026-01-31"], field_name: "created_at" }
    ]), now).compile()
    const dates = between.filter((p): p is Date => p instanceof Date).map((d) => d.toISOString())
    assert.deepStrictEqual(dates, ["2026-01-01T00:00:00.000Z", "2026-02-01T00:00:00.000Z"])
    assert.match(text, /c\.created_at >= \$\d+ AND c\.created_at < \$\d+/)
  })

  it("joins groups with or as a UNION of AND-lists, and everything else as one AND-list", () => {
    const groups: ReadonlyArray<ConditionInput> = [
      { group: 1, type: "tag", operator: "has_any", value: [1] },
      { group: 1, type: "status", operator: "is", value: "active" },
      { group: 2, type: "channel", operator: "in", value: [2] }
    ]
    const [or] = countStatement(sql, company, definition(groups, "or"), now).compile()
    assert.strictEqual(or.split(" UNION ").length, 2)
    assert.notInclude(or, " OR ")
    const [and] = countStatement(sql, company, definition(groups, "and"), now).compile()
    assert.notInclude(and, "UNION")
    // One group is one AND-list whatever the logic.
    const [single] = countStatement(sql, company, definition(groups.slice(0, 2), "or"), now).compile()
    assert.notInclude(single, "UNION")
  })

  it("a static segment selects its live members only", () => {
    const [text, params] = idsStatement(sql, company, { type: "static", segmentId: 77 }, now).compile()
    assert.match(text, /segment_members m/)
    assert.match(text, /c\.deleted_at IS NULL/)
    assert.include(params, 77)
  })

  it.effect("memberCount reads the time from the Clock", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.parse("2026-03-10T00:00:00.000Z"))
      const statement = yield* memberCount(company, definition([{ type: "activity", operator: "replied_within_days", value: 7 }]))
      const [, params] = statement.compile()
      assert.isTrue(params.some((p) => p instanceof Date && p.toISOString() === "2026-03-03T00:00:00.000Z"))
    }).pipe(Effect.provideService(SqlClient.SqlClient, sql as unknown as SqlClient.SqlClient)))

  it("normalizes conditions: group defaults to 1, ids are deduplicated, custom_fields. is dropped from the key", () => {
    const parsed = parse([
      { type: "tag", operator: "has_all", value: [3, 3, 4] },
      { type: "custom", operator: "is", value: 12, field_name: "custom_fields.size", group: 2 }
    ])
    assert.strictEqual(parsed._tag, "Valid")
    if (parsed._tag !== "Valid") return
    assert.deepStrictEqual(parsed.rules.map((r) => r.condition), [
      { group: 1, type: "tag", operator: "has_all", value: [3, 4], field_name: null },
      { group: 2, type: "custom", operator: "is", value: "12", field_name: "size" }
    ])
    assert.strictEqual(
      summarize(parsed.rules, "or", { tags: new Map([[3, "a"]]), channels: new Map() }),
      "Has all of the tags a, #4 or custom field size is \"12\"."
    )
  })
})

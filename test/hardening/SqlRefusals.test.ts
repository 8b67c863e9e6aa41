import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { SqlClient, SqlError } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { Conflict, Unprocessable } from "../../src/platform/Errors.ts"
import { sqlRefusal } from "../../src/platform/SqlRefusals.ts"
import { createCompany, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

/** The SqlError the database gives for `statement` (run after `setup`), as the app's driver reports it. */
const refusalOf = (statement: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, SqlError.SqlError>) =>
  server.runInApp(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const error = yield* Effect.flip(statement(sql))
    return { tag: error.reason._tag, refusal: sqlRefusal(error) }
  }))

const unprocessable = (refusal: Option.Option<Unprocessable | Conflict>) => {
  assert.isTrue(Option.isSome(refusal))
  const value = Option.getOrUndefined(refusal)
  assert.instanceOf(value, Unprocessable)
  return value as Unprocessable
}

describe("a database refusal the service did not expect", () => {
  it("answers a unique value taken as the later writer would be told: 422 on the field, not the company id", async () => {
    const company = await createCompany(server)
    const { tag, refusal } = await refusalOf((sql) =>
      sql`INSERT INTO tags (company_id, name) VALUES (${company.id}, 'dup'), (${company.id}, 'DUP')`)
    assert.strictEqual(tag, "UniqueViolation")
    assert.deepStrictEqual(unprocessable(refusal).errors, { name: ["The name has already been taken."] })
  })

  it("answers a reference to a record gone meanwhile with 422 on that field, a missing value as required", async () => {
    const company = await createCompany(server)
    const missing = await refusalOf((sql) =>
      sql`INSERT INTO segment_members (company_id, segment_id, contact_id) VALUES (${company.id}, 2147483000, 2147483000)`)
    assert.strictEqual(missing.tag, "ConstraintError")
    const field = Object.keys(unprocessable(missing.refusal).errors ?? {})[0]
    assert.match(field, /^(segment|contact)_id$/)
    const required = await refusalOf((sql) => sql`INSERT INTO tags (company_id, name) VALUES (${company.id}, NULL)`)
    assert.deepStrictEqual(unprocessable(required.refusal).errors, { name: ["The name field is required."] })
  })

  it("answers a deadlock or serialization failure with 409 concurrent_write, and leaves connection trouble alone", () => {
    for (const reason of [new SqlError.DeadlockError({ cause: {} }), new SqlError.SerializationError({ cause: {} })]) {
      const refusal = Option.getOrUndefined(sqlRefusal(new SqlError.SqlError({ reason })))
      assert.instanceOf(refusal, Conflict)
      assert.strictEqual((refusal as Conflict).reason, "concurrent_write")
    }
    assert.isTrue(Option.isNone(sqlRefusal(new SqlError.SqlError({ reason: new SqlError.ConnectionError({ cause: {} }) }))))
    assert.isTrue(Option.isNone(sqlRefusal(new Error("boom"))))
  })
})

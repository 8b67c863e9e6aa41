import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Layer } from "effect"
import { TestRunner } from "effect/cluster"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { Company } from "../../cluster/Company.ts"
import { CompanyLayer } from "../../cluster/CompanyHandlers.ts"
import { query } from "../support/Sql.ts"
import { createCompany, type RunningServer, startServer } from "../support/TestServer.ts"

// The company's entity over the app's own database, under a real (in-memory) sharding, which restarts an
// entity on a fatal defect and replays what it was doing, as production does.

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const rules = [{ scope: "company" as const, limit: 5, windowMs: 60_000 }]

const companyClient = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      CompanyLayer.pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, sql)), Layer.provideMerge(TestRunner.layer))
    )
    return yield* Company.client.pipe(Effect.provideContext(context))
  })

describe("Company entity", () => {
  it.live("answers a hit that dies with its defect, runs it once, and goes on with the company's next hits at once", () =>
    Effect.gen(function*() {
      const sql = yield* Effect.promise(() => server.runInApp(SqlClient.SqlClient))
      const a = yield* Effect.promise(() => createCompany(server))
      const company = (yield* companyClient(sql))(String(a.id))
      // PostgreSQL refuses a NUL byte in text: the insert of this hit fails inside the entity.
      const bad = yield* Effect.forkChild(Effect.exit(company.ConsumeLogged({ log: "defects", subject: "bad\u0000subject", rules })))
      const failed = yield* Fiber.join(bad).pipe(Effect.timeout("2 seconds"))
      assert.isTrue(Exit.isFailure(failed) && Cause.hasDies(failed.cause), String(failed))

      const good = yield* company.ConsumeLogged({ log: "defects", subject: "fine", rules }).pipe(Effect.timeout("1 second"))
      assert.deepStrictEqual([good.allowed, good.remaining], [true, 4], "the failed hit counted nothing")
      const bucket = yield* company.Consume({ bucket: "token:1", limit: 2, windowMs: 60_000 }).pipe(Effect.timeout("1 second"))
      assert.isTrue(bucket.allowed)
      // Not replayed: the entity kept its state and did not run the bad hit again.
      const rows = yield* Effect.promise(() =>
        query<{ subject: string }>(server, "SELECT subject FROM company_throttle_log WHERE company_id = $1 AND log = 'defects' ORDER BY id", [a.id])
      )
      assert.deepStrictEqual(rows.map((r) => r.subject), ["fine"])
    }).pipe(Effect.scoped))
})

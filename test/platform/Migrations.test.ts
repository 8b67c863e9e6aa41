import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "../../src/platform/Config.ts"
import { migrate } from "../../src/platform/Migrations.ts"
import { SqlLayer } from "../../src/platform/Sql.ts"

// Its own in-memory PGlite, so the bookkeeping table starts empty whatever DATABASE_URL says.
const FreshDatabase = SqlLayer.pipe(Layer.provide(AppConfig.layerWith({ dataDir: "memory://", databaseUrl: Option.none() })))

const table = (name: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE ${sql(name)} (id int)`
  })

describe("migrations", () => {
  it.effect("apply a lower-numbered migration merged after a higher one, each exactly once", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const first = yield* migrate({ "0001_a": table("m_a"), "0003_c": table("m_c") })
      assert.deepStrictEqual(first, ["1_a", "3_c"])
      const second = yield* migrate({ "0001_a": table("m_a"), "0002_b": table("m_b"), "0003_c": table("m_c") })
      assert.deepStrictEqual(second, ["2_b"])
      const again = yield* migrate({ "0001_a": table("m_a"), "0002_b": table("m_b"), "0003_c": table("m_c") })
      assert.deepStrictEqual(again, [])
      const recorded = yield* sql<{ migration_id: number }>`SELECT migration_id FROM schema_migrations ORDER BY 1`
      assert.deepStrictEqual(recorded.map((row) => Number(row.migration_id)), [1, 2, 3])
      const made = yield* sql<{ name: string }>`SELECT tablename AS name FROM pg_tables WHERE tablename LIKE 'm\\_%' ORDER BY 1`
      assert.deepStrictEqual(made.map((row) => row.name), ["m_a", "m_b", "m_c"])
    }).pipe(Effect.provide(FreshDatabase)))

  it.effect("a failing migration leaves nothing behind, neither its work nor its record", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const failing = Effect.andThen(table("m_half"), Effect.fail(new Error("boom")))
      const exit = yield* Effect.exit(migrate({ "0001_a": table("m_a"), "0002_bad": failing }))
      assert.strictEqual(exit._tag, "Failure")
      const made = yield* sql<{ name: string }>`SELECT tablename AS name FROM pg_tables WHERE tablename LIKE 'm\\_%'`
      assert.deepStrictEqual(made, [])
      const recorded = yield* sql`SELECT migration_id FROM schema_migrations`
      assert.strictEqual(recorded.length, 0)
    }).pipe(Effect.provide(FreshDatabase)))
})

import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { migrations } from "../../migrations/index.ts"

const table = "schema_migrations"

/**
 * Applies every migration of `migrations/index.ts` that the database has not recorded, in id
 * order, in one transaction under an exclusive lock of the bookkeeping table (so runners starting
 * together apply each migration once). Unlike effect's `Migrator`, which skips every id at or
 * below the newest applied one, a migration merged after a higher-numbered one still runs: work
 * landing from parallel branches is numbered when it starts, not when it merges.
 */
export const migrate = (
  record: Readonly<Record<string, Effect.Effect<unknown, unknown, SqlClient.SqlClient>>>
) => Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const exists = sql<{ found: boolean }>`SELECT to_regclass(${table}) IS NOT NULL AS found`.pipe(
    Effect.map((rows) => rows[0]!.found)
  )
  if (!(yield* exists)) {
    // Two runners may race to create it; the loser finds it made.
    yield* sql`CREATE TABLE ${sql(table)} (
      migration_id integer PRIMARY KEY,
      created_at timestamptz NOT NULL DEFAULT now(),
      name text NOT NULL
    )`.pipe(Effect.catch((error) => Effect.flatMap(exists, (found) => found ? Effect.void : Effect.fail(error))))
  }
  const pending = Object.entries(record)
    .map(([key, effect]) => ({ id: Number(key.slice(0, 4)), name: key.slice(5), effect }))
    .sort((a, b) => a.id - b.id)
  return yield* sql.withTransaction(Effect.gen(function*() {
    yield* sql`LOCK TABLE ${sql(table)} IN ACCESS EXCLUSIVE MODE`
    const applied = new Set(
      (yield* sql<{ migration_id: number }>`SELECT migration_id FROM ${sql(table)}`).map((row) => Number(row.migration_id))
    )
    const done: Array<string> = []
    for (const migration of pending) {
      if (applied.has(migration.id)) continue
      done.push(`${migration.id}_${migration.name}`)
      yield* migration.effect.pipe(Effect.withSpan(`migration ${migration.id}_${migration.name}`))
      yield* sql`INSERT INTO ${sql(table)} (migration_id, name) VALUES (${migration.id}, ${migration.name})`
      yield* Effect.logDebug("migration applied").pipe(Effect.annotateLogs("migration", `${migration.id}_${migration.name}`))
    }
    return done
  }))
})

export const runMigrations = migrate(migrations).pipe(Effect.orDie)

export const MigrationsLayer = Layer.effectDiscard(runMigrations.pipe(
  Effect.tap((applied) =>
    Effect.logInfo(applied.length === 0 ? "migrations: database up to date" : "migrations applied").pipe(
      Effect.annotateLogs({ applied, known: Object.keys(migrations).length })
    )
  )
))

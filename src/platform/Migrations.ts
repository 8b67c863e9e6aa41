import { PgMigrator } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { Migrator } from "effect/sql"
import { NodeServices } from "@effect/platform-node"
import { migrations } from "../../migrations/index.ts"

// A static record (not a directory scan) so that tsx, vitest and Deno all load the same modules.
export const runMigrations = PgMigrator.run({ loader: Migrator.fromRecord(migrations), table: "schema_migrations" }).pipe(
  Effect.provide(NodeServices.layer),
  Effect.orDie
)

export const MigrationsLayer = Layer.effectDiscard(runMigrations)

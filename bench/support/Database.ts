import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "../../src/platform/Config.ts"
import { SqlLayer } from "../../src/platform/Sql.ts"

export const pgLayer = (url: string, maxConnections: number) => PgClient.layer({ url: Redacted.make(url), maxConnections })

/** Runs `effect` on one connection to `url`; a failure rejects the promise. */
export const runOn = <A, E>(url: string, effect: Effect.Effect<A, E, SqlClient.SqlClient | PgClient.PgClient>) =>
  Effect.runPromise(effect.pipe(Effect.provide(pgLayer(url, 1))) as Effect.Effect<A, E>)

/** One statement (with `$n` parameters) on one connection to `url`, e.g. CREATE DATABASE (which cannot run in a transaction). */
export const runSql = <Row extends object = object>(url: string, statement: string, params: ReadonlyArray<unknown> = []) =>
  runOn(url, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.unsafe<Row>(statement, params as Array<unknown>)
  }))

export interface BenchDatabase {
  readonly name: string
  readonly url: string
  /** Drops the database (WITH FORCE: connections the app left behind do not hold it); nothing for a kept one. */
  readonly drop: () => Promise<void>
}

/**
 * A database of the bench's own on the server of `serverUrl`: `${prefix}_<time>_<pid>`, created here and
 * dropped by `drop`. The app's runners register in the database they use, and runners left there by a
 * crashed process keep their shard assignments until evicted, which can stall a new runner's start; and
 * generated data must not mix with anything else. With `keep`, that database is used instead, created
 * only if missing, and never dropped, so expensive data can be reused by a later run.
 */
export const benchDatabase = async (serverUrl: string, prefix: string, keep?: string): Promise<BenchDatabase> => {
  const name = keep ?? `${prefix}_${Date.now().toString(36)}_${process.pid}`
  const exists = keep !== undefined &&
    (await runSql<{ exists: boolean }>(serverUrl, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = '${name.replace(/'/g, "''")}') AS exists`))[0].exists
  if (!exists) await runSql(serverUrl, `CREATE DATABASE ${name}`)
  const url = new URL(serverUrl)
  url.pathname = `/${name}`
  return {
    name,
    url: url.toString(),
    drop: async () => {
      if (keep === undefined) await runSql(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    }
  }
}

/** The app's own client (pool, pipelining, int8 as numbers) and configuration, on a bench database. */
export const runLikeApp = <A, E>(url: string, effect: Effect.Effect<A, E, SqlClient.SqlClient | AppConfig>) =>
  Effect.runPromise(
    effect.pipe(
      Effect.provide(SqlLayer.pipe(Layer.provideMerge(AppConfig.layerWith({ databaseUrl: Option.some(Redacted.make(url)) }))))
    )
  )

/**
 * A line for the report when the server runs without autovacuum (as this repository's CI machine does):
 * tables that grow inside a run are never analysed, and plans cached while they were small (foreign key
 * checks among them) keep scanning them whole, so a long run's figures are not what production would see.
 */
export const autovacuumWarning = async (url: string): Promise<string | null> => {
  const [row] = await runSql<{ autovacuum: string }>(url, "SELECT current_setting('autovacuum') AS autovacuum")
  return row.autovacuum === "on"
    ? null
    : "autovacuum is off on this server: tables that grow in the run are never analysed, and plans cached while they were small (foreign key checks) scan them whole; production runs with it on (`ALTER SYSTEM SET autovacuum = on` + `SELECT pg_reload_conf()` for a sitting)"
}

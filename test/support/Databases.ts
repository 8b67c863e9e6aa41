import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"

/**
 * A database of its own next to `url`'s: runners registered in a shared database by other processes (a crashed dev
 * server, say) keep shard assignments until the health check evicts them, which would make ownership nondeterministic.
 * Falls back to `url` itself when the role may not create databases.
 */
export const freshDatabase = async (url: string) => {
  const name = `crm_cluster_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`
  const admin = PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })
  const created = await Effect.runPromise(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql.unsafe(`CREATE DATABASE ${name}`)
    }).pipe(Effect.provide(admin), Effect.as(true), Effect.catchCause(() => Effect.succeed(false)))
  )
  if (!created) return { url, drop: async () => {} }
  const own = new URL(url)
  own.pathname = `/${name}`
  return {
    url: own.toString(),
    drop: () =>
      Effect.runPromise(
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
        }).pipe(Effect.provide(admin), Effect.ignore)
      )
  }
}

/** Runs `effect` on a connection of its own to `url`: a test's hand on the database a spawned server uses. */
export const onDatabase = <A>(url: string, effect: Effect.Effect<A, unknown, SqlClient.SqlClient>): Promise<A> =>
  Effect.runPromise(effect.pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })), Effect.orDie))

import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import type { RunningServer } from "./TestServer.ts"

/** Raw SQL inside the running app (its own database, PGlite or PostgreSQL). */
export const query = <A extends object = any>(server: RunningServer, text: string, params: ReadonlyArray<unknown> = []) =>
  server.runInApp(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.unsafe<A>(text, params as Array<unknown>)
  }).pipe(Effect.orDie))

/** Events of a company with this key, oldest first (straight from the events table). */
export const eventsOf = (server: RunningServer, companyId: number, key: string) =>
  query<{ seq: number; payload: any }>(server, "SELECT seq, payload FROM events WHERE company_id = $1 AND key = $2 ORDER BY seq", [companyId, key])

/** The payloads of `eventsOf`. */
export const payloadsOf = (server: RunningServer, companyId: number, key: string) =>
  eventsOf(server, companyId, key).then((rows) => rows.map((row) => row.payload))

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Events are appended without a sequence number and numbered after commit by the company's
 * sequencer (src/events/Events.ts), so writers no longer hold the company's counter row through
 * their commit. The partial index finds what is still to number.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE events ALTER COLUMN seq DROP NOT NULL`
  yield* sql`CREATE INDEX events_unsequenced_idx ON events (company_id, id) WHERE seq IS NULL`
})

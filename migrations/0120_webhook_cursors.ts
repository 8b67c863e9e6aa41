import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The delivery cursor gets a row of its own: advancing it no longer takes the integration's row lock,
 * which every recorded outcome (health) also takes, so reading the event log never waits for an outcome's
 * commit. `integrations.cursor_seq` stays the starting point (the company's last event when it was
 * created); a missing cursor row means "nothing read yet".
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE webhook_cursors (
      integration_id bigint PRIMARY KEY REFERENCES integrations(id) ON DELETE CASCADE,
      cursor_seq bigint NOT NULL
    )`
  yield* sql`INSERT INTO webhook_cursors (integration_id, cursor_seq) SELECT id, cursor_seq FROM integrations`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** The settle sweep looks for keys still pending past deadline plus lease: a few rows among a day's keys. */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX idempotency_keys_pending_idx ON idempotency_keys (created_at) WHERE state = 'pending'`
})

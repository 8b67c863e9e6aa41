import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * A tag or a channel belongs to one company, so `company_id = ? AND tag_id = ?` selects as many rows
 * as `tag_id = ?` alone. Without these statistics PostgreSQL multiplies both selectivities, guesses a
 * few rows for a big company's tag and picks per-contact index probes (measured: a nested loop over
 * 80k contacts for "tag and channel" at 1M contacts).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE STATISTICS IF NOT EXISTS contact_tags_segment_stats (dependencies, ndistinct) ON company_id, tag_id FROM contact_tags`
  yield* sql`CREATE STATISTICS IF NOT EXISTS threads_segment_stats (dependencies, ndistinct) ON company_id, channel_id FROM threads`
  yield* sql`ANALYZE contact_tags`
  yield* sql`ANALYZE threads`
})

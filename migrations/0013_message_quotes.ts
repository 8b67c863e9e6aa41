import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * `quoted_message_id` references messages with ON DELETE SET NULL: without an index every deleted
 * message (a company or conversation removed with its messages) scans the whole table for quotes.
 * Partial, since most messages quote nothing.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX messages_quoted_idx ON messages (quoted_message_id) WHERE quoted_message_id IS NOT NULL`
})

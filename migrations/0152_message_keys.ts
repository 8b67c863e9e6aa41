import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Two more foreign keys of the per-message tables go, for the reason of 0150: a message's sender is
 * one user for every message of a broadcast (a hot parent again), and a status row's message is
 * locked by its check right after the same statement inserted it. Together they were 25% of a
 * broadcast batch's final statement. Messages are never deleted (only marked), so statuses cannot be
 * orphaned; the one user ever deleted, a service account, has its messages' sender cleared by the
 * statement that deletes it (`ApiTokensRepo.deleteServiceAccount`), as the key's SET NULL did.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE messages DROP CONSTRAINT messages_sender_user_id_fkey`
  yield* sql`ALTER TABLE message_statuses DROP CONSTRAINT message_statuses_message_id_fkey`
})

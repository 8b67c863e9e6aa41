import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * No foreign keys from the per-message tables to their company or channel. Every insert checked its
 * parent with a KEY SHARE lock on that one row, so concurrent writers of one company (a broadcast's
 * batches, the event sequencer's NO KEY UPDATE) shared it through multixacts: a 30k-recipient run went
 * from 1,140 to 1,880 recipients/s without them. Nothing relied on them: companies are never deleted
 * and channels only soft-deleted, so their cascades never ran, and the ids come from rows the company
 * owns (the request's company, a channel read with it). The keys to rows of the same message
 * (conversation, thread, account, sender) stay: they are spread over many parents.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE events DROP CONSTRAINT events_company_id_fkey`
  yield* sql`ALTER TABLE messages DROP CONSTRAINT messages_company_id_fkey, DROP CONSTRAINT messages_channel_id_fkey`
  yield* sql`ALTER TABLE message_statuses DROP CONSTRAINT message_statuses_company_id_fkey`
  yield* sql`ALTER TABLE conversations DROP CONSTRAINT conversations_company_id_fkey`
  yield* sql`ALTER TABLE threads DROP CONSTRAINT threads_company_id_fkey, DROP CONSTRAINT threads_channel_id_fkey`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Who a channel contacted outside the customer-service window, for the WhatsApp messaging limit
 * (unique customers contacted outside the window per rolling 24 h). One row per contact account and
 * channel: `contacted_at` is when its current 24 hours began, refreshed only once they have passed,
 * so the rows of a channel with `contacted_at` in the last 24 h are the customers counted now.
 * No foreign key to the company or channel, for the reason 0150 gives; the account's goes with it.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE messaging_limit_contacts (
      company_id bigint NOT NULL,
      channel_id bigint NOT NULL,
      contact_account_id bigint NOT NULL REFERENCES contact_accounts(id) ON DELETE CASCADE,
      contacted_at timestamptz NOT NULL,
      PRIMARY KEY (company_id, channel_id, contact_account_id)
    )`
  yield* sql`CREATE INDEX messaging_limit_contacts_recent_idx ON messaging_limit_contacts (company_id, channel_id, contacted_at)`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Call-permission requests sent through the provider and the contact's answers read from its
 * webhooks. A request is reserved (`sending`) before the provider call so that concurrent
 * requests see it against the limits; the provider's message id lets the answer find its
 * request. An answer nobody asked for (the contact granted from the business profile, or by
 * calling) is its own row, `origin = 'reply'`, and does not count against the request limits.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE call_permission_requests
      DROP CONSTRAINT call_permission_requests_status_check,
      ADD CONSTRAINT call_permission_requests_status_check CHECK (status IN ('sending', 'pending', 'granted', 'rejected')),
      ADD COLUMN origin text NOT NULL DEFAULT 'request' CHECK (origin IN ('request', 'reply')),
      ADD COLUMN permanent boolean NOT NULL DEFAULT false,
      ADD COLUMN external_message_id text,
      ADD COLUMN answer_message_id text`
  yield* sql`
    CREATE INDEX call_permission_requests_message_idx ON call_permission_requests (channel_id, external_message_id)
    WHERE external_message_id IS NOT NULL`
  yield* sql`
    CREATE INDEX call_permission_requests_answer_idx ON call_permission_requests (channel_id, answer_message_id)
    WHERE answer_message_id IS NOT NULL`
})

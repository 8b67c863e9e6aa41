import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * `outbound_emails` becomes the mail outbox the drain (src/platform/Mail.ts) works through:
 * `pending` → `sending` (claimed, leased) → `sent` | `logged` (no SMTP configured) | `failed`, or
 * `unknown` when a runner died mid-send (never sent again: at most once after the server accepts).
 * Rows written before the drain existed were never meant to leave the machine: `skipped`.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE outbound_emails
      ADD COLUMN status text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'sending', 'sent', 'logged', 'failed', 'unknown', 'skipped')),
      ADD COLUMN attempts int NOT NULL DEFAULT 0,
      ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now(),
      ADD COLUMN lease_until timestamptz,
      ADD COLUMN sent_at timestamptz,
      ADD COLUMN message_id text,
      ADD COLUMN last_error text`
  yield* sql`UPDATE outbound_emails SET status = 'skipped'`
  yield* sql`CREATE INDEX outbound_emails_due_idx ON outbound_emails (next_attempt_at, id) WHERE status = 'pending'`
  yield* sql`CREATE INDEX outbound_emails_sending_idx ON outbound_emails (lease_until) WHERE status = 'sending'`
})

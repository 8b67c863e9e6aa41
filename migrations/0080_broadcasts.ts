import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Broadcasts, their runs, the recipient snapshot of each run and the click links. Delivery,
 * read and reply times are read from the recipient's message and thread, not copied here.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Send windows and daily limits are read in the recipient's zone, else the company's.
  yield* sql`ALTER TABLE companies ADD COLUMN IF NOT EXISTS timezone text NOT NULL DEFAULT 'UTC'`
  yield* sql`ALTER TABLE contacts ADD COLUMN IF NOT EXISTS timezone text`
  yield* sql`
    CREATE TABLE broadcasts (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      name text NOT NULL,
      status text NOT NULL CHECK (status IN ('draft', 'scheduled', 'active', 'completed', 'failed', 'cancelled')),
      segment_id bigint,
      channel_ids jsonb NOT NULL DEFAULT '[]',
      content jsonb NOT NULL DEFAULT '{}',
      schedule jsonb NOT NULL DEFAULT '{}',
      recurrence jsonb,
      recurring_paused boolean NOT NULL DEFAULT false,
      next_run_at timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      deleted_at timestamptz
    )`
  yield* sql`CREATE INDEX broadcasts_company_idx ON broadcasts (company_id, id DESC) WHERE deleted_at IS NULL`
  yield* sql`
    CREATE TABLE broadcast_runs (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      broadcast_id bigint NOT NULL REFERENCES broadcasts(id) ON DELETE CASCADE,
      status text NOT NULL CHECK (status IN ('processing', 'paused', 'completed', 'cancelled', 'failed')),
      total int NOT NULL DEFAULT 0,
      started_at timestamptz NOT NULL,
      completed_at timestamptz
    )`
  yield* sql`CREATE INDEX broadcast_runs_broadcast_idx ON broadcast_runs (company_id, broadcast_id, id DESC)`
  yield* sql`
    CREATE TABLE broadcast_recipients (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL,
      broadcast_id bigint NOT NULL,
      run_id bigint NOT NULL REFERENCES broadcast_runs(id) ON DELETE CASCADE,
      contact_id bigint NOT NULL,
      channel_id bigint NOT NULL,
      contact_account_id bigint NOT NULL,
      identifier text NOT NULL,
      variant_key text,
      timezone text NOT NULL,
      preferred_minute int,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sending', 'sent', 'failed', 'skipped')),
      error_message text,
      attempts int NOT NULL DEFAULT 0,
      message_id bigint,
      sent_at timestamptz,
      UNIQUE (run_id, contact_id)
    )`
  yield* sql`CREATE INDEX broadcast_recipients_claim_idx ON broadcast_recipients (run_id, status, channel_id, id)`
  yield* sql`CREATE INDEX broadcast_recipients_broadcast_idx ON broadcast_recipients (company_id, broadcast_id, id)`
  yield* sql`CREATE INDEX broadcast_recipients_sent_idx ON broadcast_recipients (broadcast_id, channel_id, sent_at) WHERE sent_at IS NOT NULL`
  yield* sql`
    CREATE TABLE broadcast_links (
      code text PRIMARY KEY,
      company_id bigint NOT NULL,
      recipient_id bigint NOT NULL REFERENCES broadcast_recipients(id) ON DELETE CASCADE,
      url text NOT NULL,
      clicks int NOT NULL DEFAULT 0,
      clicked_at timestamptz
    )`
  yield* sql`CREATE INDEX broadcast_links_recipient_idx ON broadcast_links (recipient_id)`
})

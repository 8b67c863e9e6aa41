import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Webhook integrations, their delivery outbox and their delivery log. Deliveries are written from the
 * committed event log: `cursor_seq` is the last event (company sequence) an integration has turned into
 * delivery rows, advanced in the same transaction that inserts them, so a restart resumes where it was.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE integrations (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      type text NOT NULL CHECK (type IN ('webhook')),
      name text NOT NULL,
      status text NOT NULL CHECK (status IN ('active', 'disabled')),
      settings jsonb NOT NULL,
      secrets bytea NOT NULL,
      secret_names text[] NOT NULL DEFAULT '{}',
      credential_created_at timestamptz NOT NULL,
      credential_updated_at timestamptz NOT NULL,
      rotated_at timestamptz,
      cursor_seq bigint NOT NULL,
      last_success_at timestamptz,
      last_failure_at timestamptz,
      last_error text,
      consecutive_failures int NOT NULL DEFAULT 0,
      failing_since timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX integrations_company_idx ON integrations (company_id, id)`
  yield* sql`CREATE INDEX integrations_active_idx ON integrations (company_id) WHERE status = 'active'`
  yield* sql`
    CREATE TABLE webhook_deliveries (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL,
      integration_id bigint NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
      event_id bigint NOT NULL,
      state text NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
      attempts int NOT NULL DEFAULT 0,
      next_attempt_at timestamptz NOT NULL,
      lease_until timestamptz,
      lease_token text,
      created_at timestamptz NOT NULL,
      finished_at timestamptz,
      UNIQUE (integration_id, event_id)
    )`
  yield* sql`CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (integration_id, next_attempt_at, id) WHERE state = 'pending'`
  yield* sql`CREATE INDEX webhook_deliveries_leased_idx ON webhook_deliveries (integration_id) WHERE state = 'pending' AND lease_token IS NOT NULL`
  yield* sql`CREATE INDEX webhook_deliveries_finished_idx ON webhook_deliveries (finished_at) WHERE state <> 'pending'`
  yield* sql`
    CREATE TABLE integration_logs (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL,
      integration_id bigint NOT NULL REFERENCES integrations(id) ON DELETE CASCADE,
      level text NOT NULL,
      code text NOT NULL,
      message text NOT NULL,
      context jsonb NOT NULL,
      created_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX integration_logs_integration_idx ON integration_logs (integration_id, id DESC)`
  yield* sql`CREATE INDEX integration_logs_created_idx ON integration_logs (created_at)`
})

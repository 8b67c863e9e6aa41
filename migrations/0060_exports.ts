import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Exports of contacts, messages and segments. The work itself is a job of the one runner
 * (`jobs`, kind `export.run`); this row is what the API shows. Deleted exports keep their row
 * (`deleted_at`) so that the daily limits still count them.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE exports (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      uuid uuid NOT NULL UNIQUE,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      type text NOT NULL CHECK (type IN ('contacts', 'messages', 'segments')),
      format text NOT NULL CHECK (format IN ('csv', 'xlsx', 'json')),
      name text NOT NULL,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'processing', 'completed', 'failed', 'expired')),
      filters jsonb NOT NULL DEFAULT '{}',
      row_count int NOT NULL DEFAULT 0,
      file_size bigint,
      file_path text,
      error_message text,
      expires_at timestamptz,
      started_at timestamptz,
      completed_at timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`
  yield* sql`CREATE INDEX exports_company_idx ON exports (company_id, id DESC) WHERE deleted_at IS NULL`
  // The daily limits count every export of the day, deleted ones included.
  yield* sql`CREATE INDEX exports_daily_idx ON exports (company_id, created_at)`
})

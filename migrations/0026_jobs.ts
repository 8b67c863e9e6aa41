import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * One table for every durable job kind (src/platform/Jobs.ts). Sticker imports were the first
 * kind with a table of their own: their rows move here (the set in `payload`, the counters in
 * `progress`, the outcome in `result`), so a queued or half-done import resumes on the new code.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE jobs (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      kind text NOT NULL,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      payload jsonb NOT NULL,
      progress jsonb,
      status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'finished', 'failed')),
      lease_owner text,
      lease_until timestamptz,
      attempts int NOT NULL DEFAULT 0,
      run_after timestamptz NOT NULL DEFAULT now(),
      result jsonb,
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz
    )`
  yield* sql`CREATE INDEX jobs_company_idx ON jobs (company_id, kind, id)`
  // Small by construction: only unfinished jobs, which the runners scan to claim and adopt.
  yield* sql`CREATE INDEX jobs_pending_idx ON jobs (kind, run_after, id) WHERE status IN ('queued', 'running')`

  yield* sql`
    INSERT INTO jobs (kind, company_id, payload, progress, status, lease_owner, lease_until, attempts, run_after,
      result, error, created_at, updated_at, finished_at)
    SELECT 'sticker.import', company_id,
      jsonb_build_object('channel_id', channel_id, 'user_id', user_id, 'set_name', set_name, 'title', title,
        'items', items, 'skipped_animated', skipped_animated, 'truncated', truncated),
      jsonb_build_object('next_index', next_index, 'imported', imported, 'failed', failed, 'pack_id', pack_id),
      status, lease_owner, lease_until, CASE WHEN status = 'queued' THEN 0 ELSE 1 END, created_at,
      CASE WHEN outcome IS NULL THEN NULL ELSE jsonb_build_object('outcome', outcome, 'name', set_name, 'title', title,
        'pack_id', pack_id, 'imported', imported, 'skipped_animated', skipped_animated, 'truncated', truncated,
        'failed', failed, 'error', error) END,
      NULL, created_at, updated_at, finished_at
    FROM sticker_imports
    ORDER BY id`
  yield* sql`DROP TABLE sticker_imports`
})

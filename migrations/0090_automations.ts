import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Automations: the automation row, its immutable graph versions, runs and their steps. A run
 * executes on the `automation.run` job kind; a `wait` ends one job and enqueues the next with
 * `run_after`, so a wait survives restarts. `state` (the run's pending nodes and step outputs) and
 * `context` (the unmasked trigger data the steps read) never leave the server.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE automations (
      id uuid PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      name text NOT NULL,
      description text,
      status text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'active', 'paused', 'archived')),
      active_version_id uuid,
      latest_version_id uuid,
      template_id text,
      executions_count int NOT NULL DEFAULT 0,
      last_run_at timestamptz,
      created_by bigint REFERENCES users(id) ON DELETE SET NULL,
      updated_by bigint REFERENCES users(id) ON DELETE SET NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX automations_company_idx ON automations (company_id, created_at DESC)`
  yield* sql`
    CREATE TABLE automation_versions (
      id uuid PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      automation_id uuid NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
      number int NOT NULL,
      nodes jsonb NOT NULL,
      edges jsonb NOT NULL,
      triggers jsonb NOT NULL,
      created_by bigint REFERENCES users(id) ON DELETE SET NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (automation_id, number)
    )`
  yield* sql`
    CREATE TABLE automation_runs (
      id uuid PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      automation_id uuid NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
      version_id uuid NOT NULL REFERENCES automation_versions(id) ON DELETE CASCADE,
      contact_id bigint,
      trigger_event text NOT NULL,
      trigger_event_id bigint,
      status text NOT NULL CHECK (status IN ('running', 'waiting', 'succeeded', 'failed', 'cancelled')),
      trigger_payload jsonb NOT NULL,
      context jsonb NOT NULL,
      state jsonb NOT NULL,
      error text,
      total_cost_usd numeric(12, 6) NOT NULL DEFAULT 0,
      total_tokens int NOT NULL DEFAULT 0,
      started_at timestamptz NOT NULL,
      finished_at timestamptz,
      resume_at timestamptz
    )`
  yield* sql`CREATE UNIQUE INDEX automation_runs_event_idx ON automation_runs (automation_id, trigger_event_id) WHERE trigger_event_id IS NOT NULL`
  yield* sql`CREATE INDEX automation_runs_list_idx ON automation_runs (company_id, automation_id, started_at DESC)`
  yield* sql`CREATE INDEX automation_runs_contact_idx ON automation_runs (automation_id, contact_id, started_at) WHERE status <> 'cancelled'`
  yield* sql`
    CREATE TABLE automation_run_steps (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      run_id uuid NOT NULL REFERENCES automation_runs(id) ON DELETE CASCADE,
      node_id text NOT NULL,
      visit int NOT NULL,
      action_id text NOT NULL,
      status text NOT NULL CHECK (status IN ('succeeded', 'failed', 'skipped')),
      attempt int NOT NULL,
      output jsonb,
      error text,
      started_at timestamptz NOT NULL,
      finished_at timestamptz NOT NULL,
      UNIQUE (run_id, node_id, visit)
    )`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Deals: funnels and their stages, deal types, lost reasons, deals, their append-only
 * timeline, deal tasks (with a durable reminder timer) and the company's deal settings.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE funnels (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      name text NOT NULL,
      is_default boolean NOT NULL DEFAULT false,
      "order" int NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX funnels_company_idx ON funnels (company_id, "order", id)`
  yield* sql`CREATE UNIQUE INDEX funnels_default_key ON funnels (company_id) WHERE is_default`
  yield* sql`
    CREATE TABLE funnel_stages (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      funnel_id bigint NOT NULL REFERENCES funnels(id) ON DELETE CASCADE,
      name text NOT NULL,
      type text NOT NULL CHECK (type IN ('open', 'success', 'failed')),
      "order" int NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX funnel_stages_funnel_idx ON funnel_stages (company_id, funnel_id, "order", id)`
  yield* sql`
    CREATE TABLE deal_types (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      name text NOT NULL,
      "order" int NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX deal_types_company_idx ON deal_types (company_id, "order", id)`
  yield* sql`
    CREATE TABLE lost_reasons (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      name text NOT NULL,
      is_active boolean NOT NULL DEFAULT true,
      "order" int NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE UNIQUE INDEX lost_reasons_name_key ON lost_reasons (company_id, lower(name))`
  yield* sql`
    CREATE TABLE deals (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      contact_id bigint NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      funnel_id bigint NOT NULL REFERENCES funnels(id),
      funnel_stage_id bigint NOT NULL REFERENCES funnel_stages(id),
      conversation_id bigint REFERENCES conversations(id) ON DELETE SET NULL,
      title text NOT NULL,
      amount numeric(20, 2) NOT NULL DEFAULT 0,
      currency text NOT NULL,
      status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'won', 'lost')),
      type_id bigint REFERENCES deal_types(id) ON DELETE SET NULL,
      source text NOT NULL DEFAULT 'manual',
      utm_source text,
      utm_medium text,
      utm_campaign text,
      probability int,
      comments text,
      begin_date date,
      expected_close_date date,
      channel text,
      custom_fields jsonb NOT NULL DEFAULT '{}',
      responsible_user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      closed_at timestamptz,
      lost_reason text,
      lost_reason_id bigint REFERENCES lost_reasons(id) ON DELETE SET NULL,
      closed_amount numeric(20, 2),
      closed_currency text,
      stage_changed_at timestamptz NOT NULL DEFAULT now(),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`
  // The board reads a funnel (and a stage of it) newest first; each list filter has its own index.
  yield* sql`CREATE INDEX deals_funnel_idx ON deals (company_id, funnel_id, id DESC) WHERE deleted_at IS NULL`
  yield* sql`CREATE INDEX deals_stage_idx ON deals (company_id, funnel_stage_id, id DESC) WHERE deleted_at IS NULL`
  yield* sql`CREATE INDEX deals_company_idx ON deals (company_id, id DESC) WHERE deleted_at IS NULL`
  yield* sql`CREATE INDEX deals_contact_idx ON deals (company_id, contact_id, id DESC)`
  yield* sql`CREATE INDEX deals_responsible_idx ON deals (company_id, responsible_user_id, id DESC) WHERE deleted_at IS NULL`
  // A conversation never gets two deals, soft-deleted ones included (their link is kept).
  yield* sql`CREATE UNIQUE INDEX deals_conversation_key ON deals (conversation_id) WHERE conversation_id IS NOT NULL`
  yield* sql`
    CREATE TABLE deal_activities (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      deal_id bigint NOT NULL REFERENCES deals(id) ON DELETE CASCADE,
      type text NOT NULL CHECK (type IN ('created', 'stage_changed', 'field_changed', 'note', 'task_created',
        'task_completed', 'won', 'lost', 'responsible_changed', 'system')),
      actor_user_id bigint,
      body text,
      metadata jsonb,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX deal_activities_deal_idx ON deal_activities (company_id, deal_id, id DESC)`
  // Append-only: a statement can neither change nor remove an entry. Removal that cascades from
  // a company (or deal) going away runs one trigger level deeper and is let through.
  yield* sql`
    CREATE FUNCTION deal_activities_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'UPDATE' OR pg_trigger_depth() <= 1 THEN
        RAISE EXCEPTION 'deal_activities is append-only';
      END IF;
      RETURN OLD;
    END $$`
  yield* sql`
    CREATE TRIGGER deal_activities_append_only BEFORE UPDATE OR DELETE ON deal_activities
    FOR EACH ROW EXECUTE FUNCTION deal_activities_append_only()`
  yield* sql`
    CREATE TABLE deal_tasks (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      deal_id bigint NOT NULL REFERENCES deals(id) ON DELETE CASCADE,
      contact_id bigint NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      type text NOT NULL CHECK (type IN ('call', 'meeting', 'follow_up', 'email', 'other')),
      title text NOT NULL,
      description text,
      due_at timestamptz,
      remind_at timestamptz,
      reminded_at timestamptz,
      status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'done', 'cancelled')),
      assigned_user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      created_by_user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      completed_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX deal_tasks_deal_idx ON deal_tasks (company_id, deal_id, id)`
  yield* sql`CREATE INDEX deal_tasks_assignee_idx ON deal_tasks (company_id, assigned_user_id, status, due_at)`
  yield* sql`CREATE INDEX deal_tasks_company_idx ON deal_tasks (company_id, status, due_at)`
  // The reminder timer: only pending reminders are indexed, so the sweep stays cheap.
  yield* sql`CREATE INDEX deal_tasks_reminder_idx ON deal_tasks (remind_at) WHERE reminded_at IS NULL AND remind_at IS NOT NULL`
  yield* sql`
    CREATE TABLE deal_settings (
      company_id bigint PRIMARY KEY REFERENCES companies(id) ON DELETE CASCADE,
      auto_create_deal_enabled boolean NOT NULL DEFAULT false,
      default_funnel_id bigint REFERENCES funnels(id) ON DELETE SET NULL,
      default_deal_title_template text,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
})

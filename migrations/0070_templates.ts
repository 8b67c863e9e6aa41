import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Message templates: a logical template (`template_groups`, name/slug/status) with one instance
 * per (channel × language) in `templates`, each moderated by the provider on its own, and the
 * group's event history. Groups and instances draw ids from one sequence so that a
 * `template_id` names either without ambiguity.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE SEQUENCE template_ids`
  yield* sql`
    CREATE TABLE template_groups (
      id bigint PRIMARY KEY DEFAULT nextval('template_ids'),
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      name text NOT NULL,
      slug text NOT NULL,
      status text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'published', 'archived')),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE UNIQUE INDEX template_groups_slug_key ON template_groups (company_id, slug)`
  yield* sql`
    CREATE TABLE templates (
      id bigint PRIMARY KEY DEFAULT nextval('template_ids'),
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      group_id bigint NOT NULL REFERENCES template_groups(id) ON DELETE CASCADE,
      channel_id bigint REFERENCES channels(id) ON DELETE SET NULL,
      language text NOT NULL,
      category text NOT NULL,
      body text NOT NULL,
      parameters jsonb NOT NULL DEFAULT '[]',
      header_enabled boolean NOT NULL DEFAULT false,
      header_type text,
      header_text text,
      footer_enabled boolean NOT NULL DEFAULT false,
      footer_text text,
      buttons_enabled boolean NOT NULL DEFAULT false,
      buttons jsonb NOT NULL DEFAULT '[]',
      labels jsonb NOT NULL DEFAULT '[]',
      meta_status text NOT NULL DEFAULT 'local',
      meta_status_reason text,
      external_id text,
      last_synced_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX templates_group_idx ON templates (company_id, group_id, id)`
  yield* sql`CREATE UNIQUE INDEX templates_instance_key ON templates (group_id, channel_id, language) WHERE channel_id IS NOT NULL`
  yield* sql`CREATE INDEX templates_external_idx ON templates (channel_id, external_id) WHERE external_id IS NOT NULL`
  // uses_count is counted from the sent messages, so a replayed or crashed send is never counted twice.
  yield* sql`
    CREATE INDEX messages_template_idx ON messages (company_id, (metadata->'template'->>'id'))
    WHERE message_type = 'template' AND direction = 'outbound'`
  yield* sql`
    CREATE TABLE template_events (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      group_id bigint NOT NULL REFERENCES template_groups(id) ON DELETE CASCADE,
      template_id bigint,
      channel_id bigint REFERENCES channels(id) ON DELETE SET NULL,
      type text NOT NULL,
      meta_status text,
      reason text,
      metadata jsonb NOT NULL DEFAULT '{}',
      actor_user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX template_events_group_idx ON template_events (company_id, group_id, id)`
})

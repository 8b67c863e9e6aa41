import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Segments (saved audiences), the members of static ones, contacts' custom fields (the `custom`
 * condition reads them), and the indexes the segment compiler's lookups lean on.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE segments (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      name text NOT NULL,
      slug text NOT NULL,
      description text NOT NULL DEFAULT '',
      type text NOT NULL CHECK (type IN ('dynamic', 'static')),
      conditions jsonb NOT NULL DEFAULT '[]',
      group_logic text NOT NULL DEFAULT 'and' CHECK (group_logic IN ('and', 'or')),
      conditions_summary text NOT NULL DEFAULT '',
      estimated_count int NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE UNIQUE INDEX segments_slug_key ON segments (company_id, slug)`
  yield* sql`CREATE INDEX segments_company_idx ON segments (company_id, created_at DESC, id DESC)`
  yield* sql`
    CREATE TABLE segment_members (
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      segment_id bigint NOT NULL REFERENCES segments(id) ON DELETE CASCADE,
      contact_id bigint NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (segment_id, contact_id)
    )`
  yield* sql`CREATE INDEX segment_members_contact_idx ON segment_members (contact_id)`
  // A constant default: no table rewrite. IF NOT EXISTS because the contacts area may add it too.
  yield* sql`ALTER TABLE contacts ADD COLUMN IF NOT EXISTS custom_fields jsonb NOT NULL DEFAULT '{}'`
  // Tag conditions read one company's tag postings without touching the heap.
  yield* sql`CREATE INDEX contact_tags_segment_idx ON contact_tags (company_id, tag_id, contact_id)`
  // Channel and last-inbound conditions go from a channel (or a time) to conversations.
  yield* sql`
    CREATE INDEX threads_segment_channel_idx ON threads (company_id, channel_id, conversation_id) WHERE NOT is_group`
  yield* sql`
    CREATE INDEX threads_segment_inbound_idx ON threads (company_id, last_inbound_at, conversation_id)
    WHERE NOT is_group AND last_inbound_at IS NOT NULL`
  yield* sql`CREATE INDEX conversations_segment_recent_idx ON conversations (company_id, last_message_at, contact_id)`
})

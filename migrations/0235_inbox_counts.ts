import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The inbox list's counts without counting conversations: per company, how many conversations there
 * are in each group of the list's filters (status, priority, assignee, team, channels, whether any
 * inbound message arrived), and per reader how many of them that reader has read up to the last
 * inbound message (`caught_up`). An "unread only" count is then the company's count minus the
 * caller's, both sums over a few hundred groups.
 *
 * Triggers append signed deltas (`conversation_count_deltas`), never update a shared counter row:
 * a counter per group would serialise every writer of a company on that row until its commit.
 * A sweep folds the deltas into `conversation_counts`; readers sum both tables in one snapshot.
 *
 * `caught_up` is the single truth for "read" in lists and counts: set when a mark covers every
 * inbound message of the (locked) conversation, cleared by the next inbound message.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE conversation_reads ADD COLUMN caught_up boolean NOT NULL DEFAULT false`
  yield* sql`
    UPDATE conversation_reads r SET caught_up = true
    FROM conversations cv WHERE cv.id = r.conversation_id AND r.read_inbound_count >= cv.inbound_count`

  // No foreign key to companies: an insert would take a KEY SHARE lock on the company row from every
  // writer of the company (see 0150). Reader 0 is the company's own count of every conversation.
  for (const table of ["conversation_counts", "conversation_count_deltas"]) {
    yield* sql.unsafe(`
      CREATE TABLE ${table} (
        ${table === "conversation_count_deltas" ? "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY," : ""}
        company_id bigint NOT NULL,
        reader_id bigint NOT NULL,
        status text NOT NULL,
        priority text,
        assigned_user_id bigint,
        assigned_team_id bigint,
        channel_ids bigint[] NOT NULL,
        has_inbound boolean NOT NULL,
        n bigint NOT NULL
      )`)
  }
  yield* sql`
    CREATE UNIQUE INDEX conversation_counts_key ON conversation_counts
      (company_id, reader_id, status, priority, assigned_user_id, assigned_team_id, channel_ids, has_inbound) NULLS NOT DISTINCT`
  yield* sql`CREATE INDEX conversation_counts_zero_idx ON conversation_counts (company_id) WHERE n = 0`
  yield* sql`CREATE INDEX conversation_count_deltas_company_idx ON conversation_count_deltas (company_id, reader_id)`
  // A queue: rows live seconds. Vacuumed often, so that counts never read pages of folded deltas.
  yield* sql`ALTER TABLE conversation_count_deltas SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000)`

  // The list's orders under its most selective filters; the company-wide order is conversations_recent_idx.
  yield* sql`CREATE INDEX conversations_inbox_status_idx ON conversations (company_id, status, last_message_at DESC NULLS LAST, id DESC)`
  yield* sql`CREATE INDEX conversations_inbox_assignee_idx ON conversations (company_id, assigned_user_id, last_message_at DESC NULLS LAST, id DESC)`

  yield* sql`
    INSERT INTO conversation_counts (company_id, reader_id, status, priority, assigned_user_id, assigned_team_id, channel_ids, has_inbound, n)
    SELECT cv.company_id, COALESCE(r.user_id, 0), cv.status, cv.priority, cv.assigned_user_id, cv.assigned_team_id, cv.channel_ids,
      cv.inbound_count > 0, count(*)
    FROM conversations cv
    LEFT JOIN LATERAL (SELECT NULL::bigint AS user_id UNION ALL
      SELECT user_id FROM conversation_reads WHERE conversation_id = cv.id AND caught_up) r ON true
    GROUP BY 1, 2, 3, 4, 5, 6, 7, 8`

  // New conversations: one delta per group per statement (a batch creates hundreds at once).
  yield* sql`
    CREATE FUNCTION conversations_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO conversation_count_deltas (company_id, reader_id, status, priority, assigned_user_id, assigned_team_id, channel_ids, has_inbound, n)
      SELECT company_id, 0, status, priority, assigned_user_id, assigned_team_id, channel_ids, inbound_count > 0, count(*)
      FROM new_conversations GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;
      RETURN NULL;
    END $$`
  yield* sql`
    CREATE TRIGGER conversations_count_inserted AFTER INSERT ON conversations
    REFERENCING NEW TABLE AS new_conversations FOR EACH STATEMENT EXECUTE FUNCTION conversations_count_inserted()`

  // A conversation leaving its group takes the company's count and its caught-up readers' counts
  // along. Deleting runs before the row goes, while its reads (deleted by cascade) still exist.
  yield* sql`
    CREATE FUNCTION conversations_count_moved() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO conversation_count_deltas (company_id, reader_id, status, priority, assigned_user_id, assigned_team_id, channel_ids, has_inbound, n)
      SELECT OLD.company_id, readers.id, OLD.status, OLD.priority, OLD.assigned_user_id, OLD.assigned_team_id, OLD.channel_ids,
        OLD.inbound_count > 0, -1
      FROM (SELECT 0::bigint AS id UNION ALL SELECT user_id FROM conversation_reads WHERE conversation_id = OLD.id AND caught_up) readers;
      IF TG_OP = 'DELETE' THEN
        RETURN OLD;
      END IF;
      INSERT INTO conversation_count_deltas (company_id, reader_id, status, priority, assigned_user_id, assigned_team_id, channel_ids, has_inbound, n)
      SELECT NEW.company_id, readers.id, NEW.status, NEW.priority, NEW.assigned_user_id, NEW.assigned_team_id, NEW.channel_ids,
        NEW.inbound_count > 0, 1
      FROM (SELECT 0::bigint AS id UNION ALL SELECT user_id FROM conversation_reads WHERE conversation_id = NEW.id AND caught_up) readers;
      RETURN NULL;
    END $$`
  yield* sql`
    CREATE TRIGGER conversations_count_moved AFTER UPDATE ON conversations FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.priority IS DISTINCT FROM NEW.priority
      OR OLD.assigned_user_id IS DISTINCT FROM NEW.assigned_user_id OR OLD.assigned_team_id IS DISTINCT FROM NEW.assigned_team_id
      OR OLD.channel_ids IS DISTINCT FROM NEW.channel_ids OR (OLD.inbound_count > 0) <> (NEW.inbound_count > 0)
      OR OLD.company_id <> NEW.company_id)
    EXECUTE FUNCTION conversations_count_moved()`
  yield* sql`
    CREATE TRIGGER conversations_count_deleted BEFORE DELETE ON conversations FOR EACH ROW
    EXECUTE FUNCTION conversations_count_moved()`

  // A reader catching up, falling behind or going: one delta in the conversation's current group
  // (none once the conversation itself is gone: its delete took its readers along).
  yield* sql`
    CREATE FUNCTION conversation_reads_count() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      conversation bigint;
      reader bigint;
      n int := -1;
    BEGIN
      IF TG_OP = 'DELETE' THEN
        conversation := OLD.conversation_id;
        reader := OLD.user_id;
      ELSE
        conversation := NEW.conversation_id;
        reader := NEW.user_id;
        IF NEW.caught_up THEN n := 1; END IF;
      END IF;
      INSERT INTO conversation_count_deltas (company_id, reader_id, status, priority, assigned_user_id, assigned_team_id, channel_ids, has_inbound, n)
      SELECT cv.company_id, reader, cv.status, cv.priority, cv.assigned_user_id, cv.assigned_team_id, cv.channel_ids, cv.inbound_count > 0, n
      FROM conversations cv WHERE cv.id = conversation;
      RETURN NULL;
    END $$`
  yield* sql`
    CREATE TRIGGER conversation_reads_count_inserted AFTER INSERT ON conversation_reads FOR EACH ROW
    WHEN (NEW.caught_up) EXECUTE FUNCTION conversation_reads_count()`
  yield* sql`
    CREATE TRIGGER conversation_reads_count_updated AFTER UPDATE ON conversation_reads FOR EACH ROW
    WHEN (OLD.caught_up IS DISTINCT FROM NEW.caught_up) EXECUTE FUNCTION conversation_reads_count()`
  yield* sql`
    CREATE TRIGGER conversation_reads_count_deleted AFTER DELETE ON conversation_reads FOR EACH ROW
    WHEN (OLD.caught_up) EXECUTE FUNCTION conversation_reads_count()`

  // The messages trigger of 0190, plus: an inbound message leaves every reader behind. A statement of
  // outbound messages only (every send) skips the inbound work.
  yield* sql`
    CREATE OR REPLACE FUNCTION conversations_on_messages() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      inbound boolean := EXISTS (SELECT 1 FROM new_messages WHERE direction = 'inbound');
    BEGIN
      IF inbound THEN
        INSERT INTO events (company_id, key, payload, created_at)
        SELECT cv.company_id, 'conversation.status_changed', jsonb_build_object(
          'conversation_id', cv.id, 'contact_id', cv.contact_id, 'from', cv.status, 'to', 'open', 'reason', 'inbound',
          'snoozed_until', NULL, 'by_user_id', NULL), date_trunc('milliseconds', now())
        FROM conversations cv
        WHERE cv.id IN (SELECT conversation_id FROM new_messages WHERE direction = 'inbound')
          AND cv.status IN ('resolved', 'snoozed');
      END IF;

      WITH latest AS (
        SELECT DISTINCT ON (conversation_id) conversation_id, id, direction, message_type, message_content, "timestamp"
        FROM new_messages ORDER BY conversation_id, id DESC
      ), totals AS (
        SELECT conversation_id,
          count(*) FILTER (WHERE direction = 'inbound') AS inbound,
          min("timestamp") FILTER (WHERE direction = 'inbound') AS first_inbound_at,
          min(created_at) FILTER (WHERE direction = 'outbound') AS first_outbound_at
        FROM new_messages GROUP BY conversation_id
      )
      UPDATE conversations cv SET
        last_message_id = latest.id,
        last_message_direction = latest.direction,
        last_message_type = latest.message_type,
        last_message_preview = left(latest.message_content, 160),
        last_message_timestamp = latest."timestamp",
        inbound_count = cv.inbound_count + totals.inbound,
        waiting_since = CASE WHEN latest.direction = 'inbound' THEN COALESCE(cv.waiting_since, totals.first_inbound_at) END,
        first_reply_at = CASE
          WHEN cv.first_reply_at IS NULL AND totals.first_outbound_at IS NOT NULL AND (cv.inbound_count > 0 OR totals.inbound > 0)
          THEN totals.first_outbound_at ELSE cv.first_reply_at END,
        status = CASE WHEN totals.inbound > 0 AND cv.status IN ('resolved', 'snoozed') THEN 'open' ELSE cv.status END,
        snoozed_until = CASE WHEN totals.inbound > 0 THEN NULL ELSE cv.snoozed_until END
      FROM latest JOIN totals USING (conversation_id)
      WHERE cv.id = latest.conversation_id;

      IF inbound THEN
        UPDATE conversation_reads SET caught_up = false
        WHERE conversation_id IN (SELECT conversation_id FROM new_messages WHERE direction = 'inbound') AND caught_up;
      END IF;
      RETURN NULL;
    END $$`

  // The recomputation of 0190 (a contact merge), plus the readers its new inbound count leaves behind.
  yield* sql`
    CREATE OR REPLACE FUNCTION conversation_refresh(p_conversation bigint) RETURNS void LANGUAGE sql AS $$
      UPDATE conversations cv SET
        last_message_id = last.id,
        last_message_direction = last.direction,
        last_message_type = last.message_type,
        last_message_preview = left(last.message_content, 160),
        last_message_timestamp = last."timestamp",
        inbound_count = (SELECT count(*) FROM messages m WHERE m.conversation_id = cv.id AND m.direction = 'inbound'),
        waiting_since = CASE WHEN last.direction = 'inbound' THEN (
          SELECT min(m."timestamp") FROM messages m WHERE m.conversation_id = cv.id AND m.direction = 'inbound'
            AND m.id > COALESCE((SELECT max(o.id) FROM messages o WHERE o.conversation_id = cv.id AND o.direction = 'outbound'), 0)
        ) END,
        first_reply_at = (
          SELECT min(o.created_at) FROM messages o WHERE o.conversation_id = cv.id AND o.direction = 'outbound'
            AND EXISTS (SELECT 1 FROM messages i WHERE i.conversation_id = cv.id AND i.direction = 'inbound' AND i.id < o.id)
        ),
        channel_ids = COALESCE((SELECT array_agg(DISTINCT t.channel_id) FROM threads t WHERE t.conversation_id = cv.id), '{}')
      FROM (SELECT NULL::int AS nothing) AS one
      LEFT JOIN LATERAL (
        SELECT m.id, m.direction, m.message_type, m.message_content, m."timestamp" FROM messages m
        WHERE m.conversation_id = p_conversation ORDER BY m.id DESC LIMIT 1
      ) last ON true
      WHERE cv.id = p_conversation;
      UPDATE conversation_reads r SET caught_up = false FROM conversations cv
      WHERE cv.id = p_conversation AND r.conversation_id = cv.id AND r.caught_up AND r.read_inbound_count < cv.inbound_count;
    $$`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The operator's inbox on the conversation row: status, snooze, priority, the last message, the
 * inbound counter that unread counts subtract from, waiting_since, first_reply_at and the channels
 * of its threads (so that visibility is a check on the row, not a join per listed conversation).
 *
 * Triggers keep the row current from every writer of messages and threads (single sends, batches,
 * inbound, imports) without each of them knowing the inbox: one statement-level trigger per insert
 * statement, so a batch of 500 messages costs one update per conversation, not per message.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE conversations
      ADD COLUMN status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'pending', 'resolved', 'snoozed')),
      ADD COLUMN snoozed_until timestamptz,
      ADD COLUMN priority text CHECK (priority IN ('low', 'medium', 'high', 'urgent')),
      ADD COLUMN waiting_since timestamptz,
      ADD COLUMN first_reply_at timestamptz,
      ADD COLUMN last_message_id bigint,
      ADD COLUMN last_message_direction text,
      ADD COLUMN last_message_type text,
      ADD COLUMN last_message_preview text,
      ADD COLUMN last_message_timestamp timestamptz,
      ADD COLUMN inbound_count int NOT NULL DEFAULT 0,
      ADD COLUMN channel_ids bigint[] NOT NULL DEFAULT '{}'`
  yield* sql`
    CREATE TABLE conversation_reads (
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      conversation_id bigint NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
      user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      last_read_message_id bigint NOT NULL,
      read_inbound_count int NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (conversation_id, user_id)
    )`
  // The snooze timer: the sweep reads due rows only.
  yield* sql`CREATE INDEX conversations_snoozed_idx ON conversations (snoozed_until) WHERE status = 'snoozed'`

  // Everything derived from messages and threads, recomputed for one conversation: the backfill, and
  // a contact merge that moves threads and messages between conversations.
  yield* sql`
    CREATE FUNCTION conversation_refresh(p_conversation bigint) RETURNS void LANGUAGE sql AS $$
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
      WHERE cv.id = p_conversation
    $$`
  yield* sql`SELECT conversation_refresh(id) FROM conversations`

  // New messages: the last one, the inbound counter, waiting_since (cleared by a reply), the first
  // reply, and an inbound reopening a resolved or snoozed conversation, announced as an event in the
  // same transaction (the sequencer numbers it with the writer's own events after commit).
  yield* sql`
    CREATE FUNCTION conversations_on_messages() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO events (company_id, key, payload, created_at)
      SELECT cv.company_id, 'conversation.status_changed', jsonb_build_object(
        'conversation_id', cv.id, 'contact_id', cv.contact_id, 'from', cv.status, 'to', 'open', 'reason', 'inbound',
        'snoozed_until', NULL, 'by_user_id', NULL), date_trunc('milliseconds', now())
      FROM conversations cv
      WHERE cv.id IN (SELECT conversation_id FROM new_messages WHERE direction = 'inbound')
        AND cv.status IN ('resolved', 'snoozed');

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
      RETURN NULL;
    END $$`
  yield* sql`
    CREATE TRIGGER conversations_on_messages AFTER INSERT ON messages
    REFERENCING NEW TABLE AS new_messages FOR EACH STATEMENT EXECUTE FUNCTION conversations_on_messages()`

  yield* sql`
    CREATE FUNCTION conversations_on_threads() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE conversations cv SET channel_ids = array_append(cv.channel_ids, NEW.channel_id)
      WHERE cv.id = NEW.conversation_id AND NOT (NEW.channel_id = ANY (cv.channel_ids));
      IF TG_OP = 'UPDATE' THEN
        UPDATE conversations cv SET channel_ids =
          COALESCE((SELECT array_agg(DISTINCT t.channel_id) FROM threads t WHERE t.conversation_id = cv.id), '{}')
        WHERE cv.id = OLD.conversation_id AND OLD.conversation_id <> NEW.conversation_id;
      END IF;
      RETURN NULL;
    END $$`
  yield* sql`
    CREATE TRIGGER conversations_on_threads AFTER INSERT OR UPDATE OF conversation_id, channel_id ON threads
    FOR EACH ROW EXECUTE FUNCTION conversations_on_threads()`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The event sequencer's run as one function, so that it is one statement (one round trip, its own
 * commit) instead of a check, BEGIN, the counter lock, the numbering and COMMIT. Inside a VOLATILE
 * function each statement takes a fresh snapshot (READ COMMITTED), so the numbering still sees the
 * events of any sequencer that held the lock before it, exactly as the separate statements did.
 * NOTIFY is sent per numbered event when a channel is given (server mode), inline up to a size.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE FUNCTION number_events(p_company bigint, p_channel text, p_node text, p_inline_limit int)
    RETURNS SETOF events LANGUAGE plpgsql AS $$
    DECLARE
      r events;
      notice text;
    BEGIN
      -- Nothing to number (every replay, most sweeps, the run after a batch): no lock, nothing written.
      IF NOT EXISTS (SELECT 1 FROM events WHERE company_id = p_company AND seq IS NULL) THEN
        RETURN;
      END IF;
      -- NO KEY: writers' foreign keys to the company (KEY SHARE) must not wait for this lock.
      PERFORM 1 FROM companies WHERE id = p_company FOR NO KEY UPDATE;
      FOR r IN
        WITH pending AS (
          SELECT id, row_number() OVER (ORDER BY id) AS n FROM events
          WHERE company_id = p_company AND seq IS NULL
        ), bumped AS (
          UPDATE companies SET event_seq = event_seq + (SELECT count(*) FROM pending)
          WHERE id = p_company AND EXISTS (SELECT 1 FROM pending)
          RETURNING event_seq - (SELECT count(*) FROM pending) AS base
        ), e AS (
          UPDATE events ev SET seq = bumped.base + pending.n FROM pending, bumped
          WHERE ev.id = pending.id
          RETURNING ev.*
        )
        SELECT * FROM e ORDER BY e.seq
      LOOP
        IF p_channel IS NOT NULL THEN
          notice := json_build_object('n', p_node, 'c', r.company_id, 'i', r.seq, 'e', json_build_object(
            'seq', r.seq, 'event', r.key, 'company_id', r.company_id,
            'occurred_at', to_char(r.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'data', r.payload))::text;
          PERFORM pg_notify(p_channel, CASE WHEN octet_length(notice) <= p_inline_limit THEN notice
            ELSE json_build_object('n', p_node, 'c', r.company_id, 'i', r.seq)::text END);
        END IF;
        RETURN NEXT r;
      END LOOP;
    END $$`
})

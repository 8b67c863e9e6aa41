import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The inline event of a notice carries the envelope's `id` (`evt_<row id>`), so a runner that gets an
 * event through NOTIFY publishes the same envelope as the runner that numbered it.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE OR REPLACE FUNCTION number_events(p_company bigint, p_channel text, p_node text, p_inline_limit int)
    RETURNS SETOF events LANGUAGE plpgsql AS $$
    DECLARE
      r events;
      first_row events;
      numbered int := 0;
      last_seq bigint;
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
        numbered := numbered + 1;
        IF numbered = 1 THEN
          first_row := r;
        END IF;
        last_seq := r.seq;
        RETURN NEXT r;
      END LOOP;
      IF p_channel IS NULL OR numbered = 0 THEN
        RETURN;
      END IF;
      IF numbered = 1 THEN
        notice := json_build_object('n', p_node, 'c', first_row.company_id, 'i', first_row.seq, 'e', json_build_object(
          'id', 'evt_' || first_row.id, 'seq', first_row.seq, 'event', first_row.key, 'company_id', first_row.company_id,
          'occurred_at', to_char(first_row.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'data', first_row.payload))::text;
        IF octet_length(notice) <= p_inline_limit THEN
          PERFORM pg_notify(p_channel, notice);
          RETURN;
        END IF;
      END IF;
      PERFORM pg_notify(p_channel, json_build_object('n', p_node, 'c', p_company, 'i', last_seq)::text);
    END $$`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * What happened to a call the API placed. Kamailio reports its dialog events into
 * `kamailio.call_events` (one INSERT each, from deploy/kamailio/kamailio.cfg); the API folds them
 * into `call_attempts` and deletes them in one transaction, with the event that announces the end.
 * `call_ref` is `call_attempts.pbx_call_id`; `leg` is `caller` (the controller ringing the caller)
 * or `callee` (the call the caller places on the REFER); `side` says who hung up.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE call_attempts
      ADD COLUMN answered_at timestamptz,
      ADD COLUMN ended_at timestamptz,
      ADD COLUMN duration_seconds integer,
      ADD COLUMN hangup_cause text`
  yield* sql`CREATE INDEX call_attempts_pbx_call_idx ON call_attempts (pbx_call_id) WHERE pbx_call_id IS NOT NULL`
  yield* sql`
    CREATE TABLE kamailio.call_events (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      call_ref text NOT NULL,
      leg text NOT NULL,
      kind text NOT NULL,
      sip_code integer NOT NULL DEFAULT 0,
      side text NOT NULL DEFAULT '',
      at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX call_events_ref_idx ON kamailio.call_events (call_ref, id)`
})

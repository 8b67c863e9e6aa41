import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The trigger consumer's durable cursor per company: every event of the company numbered up to
 * `cursor_seq` has had its runs written. A company gets its row when one of its automations is first
 * activated (at the company's current event number); a runner that starts replays the log after it,
 * so an event whose runner died before writing its runs still starts them.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE automation_trigger_cursors (
      company_id bigint PRIMARY KEY REFERENCES companies(id) ON DELETE CASCADE,
      cursor_seq bigint NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`
    INSERT INTO automation_trigger_cursors (company_id, cursor_seq)
    SELECT c.id, c.event_seq FROM companies c
    WHERE EXISTS (SELECT 1 FROM automations a WHERE a.company_id = c.id AND a.status = 'active')`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** Call attempts of the softphone, and operator rows that end with the membership they belong to. */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // A row of telephony_operators means "telephony on for this member": revoking the
  // membership must switch it off too, whatever code path deletes the membership.
  yield* sql`
    ALTER TABLE telephony_operators
      ADD CONSTRAINT telephony_operators_membership_fk FOREIGN KEY (company_id, user_id)
      REFERENCES memberships (company_id, user_id) ON DELETE CASCADE`
  yield* sql`
    CREATE TABLE call_attempts (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      caller_user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      kind text NOT NULL CHECK (kind IN ('internal', 'external')),
      callee_user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      extension text,
      number text,
      contact_id bigint REFERENCES contacts(id) ON DELETE SET NULL,
      status text NOT NULL CHECK (status IN ('initiated', 'failed')),
      pbx_call_id text,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX call_attempts_company_idx ON call_attempts (company_id, id DESC)`
  yield* sql`CREATE INDEX call_attempts_caller_idx ON call_attempts (company_id, caller_user_id, id DESC)`
})

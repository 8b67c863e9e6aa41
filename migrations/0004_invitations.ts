import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Invitations to join a company. `expired` is never stored: a pending row past
 * `expires_at` reads as expired, so no sweeper is needed.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE invitations (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      guid uuid NOT NULL UNIQUE,
      email text NOT NULL,
      role text NOT NULL CHECK (role IN ('admin', 'manager', 'agent')),
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'accepted', 'declined', 'revoked')),
      invited_by bigint REFERENCES users(id) ON DELETE SET NULL,
      answered_by bigint REFERENCES users(id) ON DELETE SET NULL,
      expires_at timestamptz NOT NULL,
      answered_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX invitations_company_idx ON invitations (company_id, id)`
  yield* sql`CREATE UNIQUE INDEX invitations_pending_email_key ON invitations (company_id, lower(email)) WHERE status = 'pending'`
})

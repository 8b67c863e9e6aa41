import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** Teams decide which channels an agent sees; operators' SIP profiles hang off memberships. */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE teams (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      name text NOT NULL,
      description text NOT NULL DEFAULT '',
      channel_access_mode text NOT NULL DEFAULT 'custom',
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX teams_company_idx ON teams (company_id, id)`
  yield* sql`
    CREATE TABLE team_members (
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      team_id bigint NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
      user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      PRIMARY KEY (team_id, user_id)
    )`
  yield* sql`CREATE INDEX team_members_user_idx ON team_members (company_id, user_id)`
  yield* sql`
    CREATE TABLE team_channels (
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      team_id bigint NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
      channel_id bigint NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      PRIMARY KEY (team_id, channel_id)
    )`
  yield* sql`
    CREATE TABLE telephony_operators (
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      extension text,
      web_sip_username text NOT NULL,
      web_sip_password text NOT NULL,
      native_sip_username text NOT NULL,
      native_sip_password text NOT NULL,
      native_enabled boolean NOT NULL DEFAULT true,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (company_id, user_id)
    )`
  yield* sql`CREATE UNIQUE INDEX telephony_extension_key ON telephony_operators (company_id, extension) WHERE extension IS NOT NULL`
})

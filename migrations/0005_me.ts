import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The signed-in user's own data: notification preferences (only the keys the user
 * changed; defaults are applied on read so a new default reaches everyone), phone
 * verification codes, the per-user send log behind the send limits, the platform-wide
 * daily SMS budget, and the SMS sandbox outbox.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE notification_preferences (
      user_id bigint PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
      preferences jsonb NOT NULL DEFAULT '{}',
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`
    CREATE TABLE phone_codes (
      user_id bigint PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
      phone text NOT NULL,
      code_hash bytea NOT NULL,
      attempts int NOT NULL DEFAULT 0,
      sent_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL
    )`
  yield* sql`
    CREATE TABLE phone_code_sends (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      sent_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX phone_code_sends_user_idx ON phone_code_sends (user_id, sent_at)`
  yield* sql`
    CREATE TABLE sms_daily_usage (
      day date PRIMARY KEY,
      used int NOT NULL
    )`
  yield* sql`
    CREATE TABLE outbound_sms (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      to_number text NOT NULL,
      body text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX outbound_sms_to_idx ON outbound_sms (to_number, id DESC)`
})

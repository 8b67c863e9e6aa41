import { Effect } from "effect"
import { SqlClient } from "effect/sql"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE EXTENSION IF NOT EXISTS pg_trgm`
  yield* sql`
    CREATE TABLE companies (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      name text NOT NULL,
      plan text NOT NULL DEFAULT 'free',
      default_currency text,
      telephony_enabled boolean NOT NULL DEFAULT false,
      event_seq bigint NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`
    CREATE TABLE users (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      email text,
      name text NOT NULL DEFAULT '',
      lastname text,
      password_hash text,
      is_service_account boolean NOT NULL DEFAULT false,
      email_verified_at timestamptz,
      phone text,
      phone_verified boolean NOT NULL DEFAULT false,
      timezone text NOT NULL DEFAULT 'UTC',
      locale text NOT NULL DEFAULT 'en',
      availability text NOT NULL DEFAULT 'offline',
      current_company_id bigint REFERENCES companies(id) ON DELETE SET NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE UNIQUE INDEX users_email_key ON users (lower(email)) WHERE email IS NOT NULL`
  yield* sql`
    CREATE TABLE memberships (
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      role text NOT NULL CHECK (role IN ('admin', 'manager', 'agent')),
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (company_id, user_id)
    )`
  yield* sql`CREATE INDEX memberships_user_idx ON memberships (user_id)`
  yield* sql`
    CREATE TABLE api_tokens (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      company_id bigint REFERENCES companies(id) ON DELETE CASCADE,
      kind text NOT NULL CHECK (kind IN ('service', 'mobile')),
      name text NOT NULL,
      description text NOT NULL DEFAULT '',
      secret_hash bytea NOT NULL,
      abilities text[] NOT NULL DEFAULT '{*}',
      expires_at timestamptz,
      last_used_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX api_tokens_company_idx ON api_tokens (company_id, id) WHERE kind = 'service'`
  yield* sql`CREATE INDEX api_tokens_user_idx ON api_tokens (user_id, name)`
  yield* sql`
    CREATE TABLE sessions (
      id text PRIMARY KEY,
      user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      csrf_token text NOT NULL,
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX sessions_user_idx ON sessions (user_id)`
  yield* sql`
    CREATE TABLE email_codes (
      user_id bigint PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
      code_hash bytea NOT NULL,
      attempts int NOT NULL DEFAULT 0,
      expires_at timestamptz NOT NULL
    )`
  yield* sql`
    CREATE TABLE outbound_emails (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      to_address text NOT NULL,
      subject text NOT NULL,
      body text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX outbound_emails_to_idx ON outbound_emails (lower(to_address), id DESC)`
  yield* sql`
    CREATE TABLE events (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      seq bigint NOT NULL,
      key text NOT NULL,
      payload jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (company_id, seq)
    )`
  yield* sql`
    CREATE TABLE app_settings (
      key text PRIMARY KEY,
      value text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** Channels, the contact core, conversations, threads, messages and their satellites. */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE channels (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      type text NOT NULL CHECK (type IN ('msgr_a', 'msgr_a_business', 'msgr_b', 'msgr_c_business')),
      provider text NOT NULL CHECK (provider IN ('sandbox', 'telegram', 'whatsapp_cloud')),
      name text NOT NULL,
      account_name text,
      status text NOT NULL DEFAULT 'connected' CHECK (status IN ('connected', 'disconnected')),
      credentials bytea,
      webhook_secret text NOT NULL,
      settings jsonb NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`
  yield* sql`CREATE INDEX channels_company_idx ON channels (company_id, id) WHERE deleted_at IS NULL`
  yield* sql`
    CREATE TABLE contacts (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      first_name text,
      last_name text,
      display_name text,
      company_name text,
      status text NOT NULL DEFAULT 'lead' CHECK (status IN ('lead', 'active', 'inactive')),
      blocked_at timestamptz,
      blocked_reason text,
      blocked_by_user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      opted_out_at timestamptz,
      merged_into_contact_id bigint REFERENCES contacts(id) ON DELETE SET NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`
  yield* sql`CREATE INDEX contacts_company_idx ON contacts (company_id, created_at DESC, id DESC) WHERE deleted_at IS NULL`
  yield* sql`
    CREATE TABLE contact_phones (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      contact_id bigint NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      phone text NOT NULL,
      type text NOT NULL DEFAULT 'mobile',
      position int NOT NULL DEFAULT 0
    )`
  yield* sql`CREATE INDEX contact_phones_lookup_idx ON contact_phones (company_id, phone)`
  yield* sql`CREATE INDEX contact_phones_contact_idx ON contact_phones (contact_id)`
  yield* sql`
    CREATE TABLE contact_emails (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      contact_id bigint NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      email text NOT NULL,
      type text NOT NULL DEFAULT 'work',
      position int NOT NULL DEFAULT 0
    )`
  yield* sql`CREATE INDEX contact_emails_contact_idx ON contact_emails (contact_id)`
  yield* sql`
    CREATE TABLE contact_accounts (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      contact_id bigint NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      channel_type text NOT NULL,
      external_id text NOT NULL,
      username text,
      display_name text,
      phone text,
      profile_picture text,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (company_id, channel_type, external_id)
    )`
  yield* sql`CREATE INDEX contact_accounts_contact_idx ON contact_accounts (contact_id)`
  yield* sql`CREATE INDEX contact_accounts_username_idx ON contact_accounts (company_id, lower(username))`
  yield* sql`
    CREATE TABLE tags (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE UNIQUE INDEX tags_name_key ON tags (company_id, lower(name))`
  yield* sql`
    CREATE TABLE contact_tags (
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      contact_id bigint NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      tag_id bigint NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
      PRIMARY KEY (contact_id, tag_id)
    )`
  yield* sql`
    CREATE TABLE conversations (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      contact_id bigint NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      last_message_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (company_id, contact_id)
    )`
  yield* sql`CREATE INDEX conversations_recent_idx ON conversations (company_id, last_message_at DESC NULLS LAST, id DESC)`
  yield* sql`
    CREATE TABLE threads (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      conversation_id bigint NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
      channel_id bigint NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      contact_account_id bigint REFERENCES contact_accounts(id) ON DELETE SET NULL,
      external_thread_id text,
      is_group boolean NOT NULL DEFAULT false,
      last_inbound_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX threads_conversation_idx ON threads (company_id, conversation_id)`
  yield* sql`CREATE UNIQUE INDEX threads_account_key ON threads (channel_id, contact_account_id) WHERE NOT is_group`
  yield* sql`CREATE UNIQUE INDEX threads_group_key ON threads (channel_id, external_thread_id) WHERE is_group`
  yield* sql`
    CREATE TABLE messages (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      conversation_id bigint NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
      thread_id bigint NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
      channel_id bigint NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      direction text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
      message_type text NOT NULL DEFAULT 'text',
      message_content text,
      external_message_id text,
      external_thread_id text,
      status text,
      sender_user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      contact_account_id bigint REFERENCES contact_accounts(id) ON DELETE SET NULL,
      quoted_message_id bigint REFERENCES messages(id) ON DELETE SET NULL,
      referral jsonb,
      metadata jsonb NOT NULL DEFAULT '{}',
      "timestamp" timestamptz NOT NULL DEFAULT now(),
      edited_at timestamptz,
      deleted_at timestamptz,
      revoked_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX messages_conversation_idx ON messages (company_id, conversation_id, "timestamp" DESC, id DESC)`
  yield* sql`CREATE INDEX messages_thread_idx ON messages (company_id, thread_id, "timestamp" DESC, id DESC)`
  yield* sql`CREATE INDEX messages_external_idx ON messages (channel_id, external_message_id) WHERE external_message_id IS NOT NULL`
  yield* sql`
    CREATE TABLE message_statuses (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      message_id bigint NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
      status text NOT NULL CHECK (status IN ('sent', 'delivered', 'read', 'failed')),
      error text,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX message_statuses_message_idx ON message_statuses (message_id, id)`
  yield* sql`
    CREATE TABLE message_reactions (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      message_id bigint NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
      channel_id bigint NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      direction text NOT NULL DEFAULT 'outbound',
      reaction text NOT NULL,
      author_user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      author_contact_account_id bigint REFERENCES contact_accounts(id) ON DELETE SET NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE UNIQUE INDEX message_reactions_outbound_key ON message_reactions (message_id, channel_id) WHERE direction = 'outbound'`
  yield* sql`
    CREATE TABLE attachments (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      message_id bigint NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
      type text NOT NULL,
      mime_type text,
      url text,
      thumbnail_url text,
      storage_path text,
      media_id bigint,
      sticker_id bigint,
      file_name text,
      size bigint,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX attachments_message_idx ON attachments (message_id)`
  yield* sql`
    CREATE TABLE idempotency_keys (
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      endpoint text NOT NULL,
      key text NOT NULL,
      request_hash text NOT NULL,
      state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done')),
      response_status int,
      response_body jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (user_id, endpoint, key)
    )`
  yield* sql`CREATE INDEX idempotency_keys_age_idx ON idempotency_keys (created_at)`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Contacts on top of the core tables of 0002: search and phone matching, a stored photo, the
 * durable log behind the Company entity's block throttles, and call-permission requests.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // One lower-cased text of the names for substring search through a trigram index.
  yield* sql`
    ALTER TABLE contacts
      ADD COLUMN photo_path text,
      ADD COLUMN photo_mime_type text,
      ADD COLUMN search_text text GENERATED ALWAYS AS (
        lower(coalesce(display_name, '') || ' ' || coalesce(first_name, '') || ' ' || coalesce(last_name, '') || ' ' || coalesce(company_name, ''))
      ) STORED`
  yield* sql`CREATE INDEX contacts_search_idx ON contacts USING gin (search_text gin_trgm_ops) WHERE deleted_at IS NULL`
  yield* sql`CREATE INDEX contacts_name_idx ON contacts (company_id, lower(display_name), id) WHERE deleted_at IS NULL`
  // Numbers arrive in many spellings (`+7 916…`, `7916…`, a wa_id); they are compared by their digits.
  yield* sql`CREATE INDEX contact_phones_digits_idx ON contact_phones (company_id, (regexp_replace(phone, '[^0-9]', '', 'g')))`
  yield* sql`CREATE INDEX contact_accounts_phone_digits_idx ON contact_accounts (company_id, (regexp_replace(phone, '[^0-9]', '', 'g'))) WHERE phone IS NOT NULL`
  yield* sql`
    CREATE INDEX contact_accounts_lid_idx ON contact_accounts (company_id, contact_id)
    WHERE external_id LIKE '%@lid' AND phone IS NULL`
  yield* sql`CREATE INDEX contact_emails_lookup_idx ON contact_emails (company_id, lower(email))`
  yield* sql`CREATE INDEX contact_tags_tag_idx ON contact_tags (tag_id)`
  yield* sql`
    CREATE TABLE company_throttle_log (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      log text NOT NULL,
      subject text NOT NULL,
      at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX company_throttle_log_idx ON company_throttle_log (company_id, log, at)`
  yield* sql`
    CREATE TABLE call_permission_requests (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      contact_id bigint NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      channel_id bigint NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'granted', 'rejected')),
      requested_by_user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      requested_at timestamptz NOT NULL,
      answered_at timestamptz,
      expires_at timestamptz
    )`
  yield* sql`CREATE INDEX call_permission_requests_idx ON call_permission_requests (company_id, contact_id, channel_id, requested_at DESC)`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Message search. Each message stores its lexemes (Russian and English stemming; the
 * `russian` configuration stems ASCII words with the English stemmer) as keys
 * `<company_id>:<lexeme>`, so the GIN index is tenant-leading in its keys: a lookup reads
 * one tenant's posting list for a word, never the whole tenant. The btree serves "newest
 * first" when a word is so frequent that walking recent messages beats collecting matches.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE FUNCTION message_search_keys(company_id bigint, content text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS 'SELECT array(SELECT company_id::text || '':'' || lexeme
                     FROM unnest(tsvector_to_array(to_tsvector(''pg_catalog.russian'', coalesce(content, '''')))) lexeme)'`
  yield* sql`
    ALTER TABLE messages ADD COLUMN search_keys text[]
      GENERATED ALWAYS AS (message_search_keys(company_id, message_content)) STORED`
  yield* sql`CREATE INDEX messages_search_idx ON messages USING gin (search_keys) WHERE deleted_at IS NULL`
  yield* sql`CREATE INDEX messages_recent_idx ON messages (company_id, created_at DESC, id DESC) WHERE deleted_at IS NULL`
})

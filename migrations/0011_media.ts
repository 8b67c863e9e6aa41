import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Uploaded files (`POST /v1/uploads`, `/v1/uploads/voice`): the bytes live in the blob store
 * under `storage_path`; attachments point at them by `media_id`.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE media (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      type text NOT NULL CHECK (type IN ('image', 'video', 'audio', 'voice', 'document')),
      mime_type text NOT NULL,
      file_name text,
      size bigint NOT NULL,
      storage_path text NOT NULL,
      duration_seconds double precision,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX media_company_idx ON media (company_id, id)`
  yield* sql`
    ALTER TABLE attachments
      ADD CONSTRAINT attachments_media_fk FOREIGN KEY (media_id) REFERENCES media(id) ON DELETE SET NULL`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * A user's photo: a stored image (an upload's storage path) and its type. The version grows on
 * every change, so the signed link (`v`) changes and a client does not keep showing an old image.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE users
      ADD COLUMN photo_path text,
      ADD COLUMN photo_mime_type text,
      ADD COLUMN photo_version int NOT NULL DEFAULT 0`
})

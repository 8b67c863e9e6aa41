import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Who a conversation is assigned to: a member or a team (the `assign-conversation` automation action
 * sets it; nothing else did before).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE conversations
      ADD COLUMN assigned_user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      ADD COLUMN assigned_team_id bigint REFERENCES teams(id) ON DELETE SET NULL`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Settling an `outcome_unknown` key: by an operator, who names the key (a company's keys by value), and by a
 * provider status webhook, which names the message (a company's unsettled keys, a handful at most).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX idempotency_keys_company_key_idx ON idempotency_keys (company_id, key)`
  yield* sql`CREATE INDEX idempotency_keys_outcome_unknown_idx ON idempotency_keys (company_id)
    WHERE state = 'done' AND response_status = 409 AND response_body->>'reason' = 'outcome_unknown'`
})

import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * `default_country`: the ISO 3166-1 alpha-2 country national phone numbers are read in (null: only
 * international numbers). `status`: the operator can suspend a company; credentials of a suspended
 * company find no active company.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE companies ADD COLUMN default_country text CHECK (default_country ~ '^[A-Z]{2}$')`
  yield* sql`ALTER TABLE companies ADD COLUMN status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended'))`
})

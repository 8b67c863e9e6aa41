import type { CompanyId } from "../auth/Domain.ts"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { ApiToken } from "./Domain.ts"

interface TokenRow {
  readonly id: number
  readonly name: string
  readonly description: string
  readonly abilities: ReadonlyArray<string>
  readonly last_used_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

const view = (row: TokenRow): ApiToken => ({
  ...row,
  last_used_at: row.last_used_at?.toISOString() ?? null,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString()
})

/** Service-account tokens only: a person's mobile tokens have no company and never show here. */
export class ApiTokensRepo extends Context.Service<ApiTokensRepo, {
  list(companyId: CompanyId): Effect.Effect<ReadonlyArray<ApiToken>>
  find(companyId: CompanyId, id: number): Effect.Effect<Option.Option<ApiToken>>
  update(
    companyId: CompanyId,
    id: number,
    patch: { readonly name?: string | undefined; readonly description?: string | undefined }
  ): Effect.Effect<Option.Option<ApiToken>>
  /** Deletes the token's service account; its tokens and membership go with it (ON DELETE CASCADE). */
  deleteServiceAccount(companyId: CompanyId, id: number): Effect.Effect<Option.Option<{ readonly id: number; readonly name: string; readonly user_id: number }>>
}>()("crm/api-tokens/ApiTokensRepo") {
  static readonly layer = Layer.effect(
    ApiTokensRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, name, description, abilities, last_used_at, created_at, updated_at`

      const list = (companyId: CompanyId) =>
        sql<TokenRow>`
          SELECT ${columns} FROM api_tokens
          WHERE company_id = ${companyId} AND kind = 'service' ORDER BY id`.pipe(
          Effect.map((rows) => rows.map(view)),
          Effect.orDie
        )

      const find = (companyId: CompanyId, id: number) =>
        sql<TokenRow>`
          SELECT ${columns} FROM api_tokens
          WHERE company_id = ${companyId} AND kind = 'service' AND id = ${id}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), view)),
          Effect.orDie
        )

      const update = (
        companyId: CompanyId,
        id: number,
        patch: { readonly name?: string | undefined; readonly description?: string | undefined }
      ) =>
        Effect.gen(function*() {
          const rows = yield* sql<TokenRow & { user_id: number }>`
            UPDATE api_tokens SET
              name = COALESCE(${patch.name ?? null}, name),
              description = COALESCE(${patch.description ?? null}, description),
              updated_at = now()
            WHERE company_id = ${companyId} AND kind = 'service' AND id = ${id}
            RETURNING ${columns}, user_id`
          const row = rows[0]
          if (row === undefined) return Option.none()
          // The service account carries the token's name (it shows as the author of its actions).
          if (patch.name !== undefined) {
            yield* sql`UPDATE users SET name = ${patch.name}, updated_at = now() WHERE id = ${row.user_id} AND is_service_account`
          }
          const { user_id: _, ...token } = row
          return Option.some(view(token))
        }).pipe(sql.withTransaction, Effect.orDie)

      const deleteServiceAccount = (companyId: CompanyId, id: number) =>
        sql<{ id: number; name: string; user_id: number }>`
          WITH gone AS (
            DELETE FROM users u USING api_tokens t
            WHERE t.company_id = ${companyId} AND t.kind = 'service' AND t.id = ${id}
              AND u.id = t.user_id AND u.is_service_account
            RETURNING t.id, t.name, t.user_id
          ), unsigned AS (
            -- Messages keep no key to their sender (migration 0152): what they sent shows no author, as before.
            UPDATE messages SET sender_user_id = NULL
            WHERE company_id = ${companyId} AND sender_user_id IN (SELECT user_id FROM gone)
          )
          SELECT id, name, user_id FROM gone`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      return ApiTokensRepo.of({ list, find, update, deleteServiceAccount })
    })
  )
}

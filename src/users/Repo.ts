import { Context, Effect, Layer, Option } from "effect"
import type { CompanyId } from "../auth/Domain.ts"
import { SqlClient } from "effect/sql"

export interface StoredPhoto {
  readonly photo_path: string
  readonly photo_mime_type: string | null
}

export class UsersRepo extends Context.Service<UsersRepo, {
  /** The photo of a user who is a member of `companyId`; none without a photo or without the membership. */
  photo(companyId: CompanyId, userId: number): Effect.Effect<Option.Option<StoredPhoto>>
}>()("crm/users/UsersRepo") {
  static readonly layer = Layer.effect(
    UsersRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      const photo = (companyId: CompanyId, userId: number) =>
        sql<StoredPhoto>`
          SELECT u.photo_path, u.photo_mime_type
          FROM memberships m JOIN users u ON u.id = m.user_id
          WHERE m.company_id = ${companyId} AND m.user_id = ${userId} AND u.photo_path IS NOT NULL`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      return UsersRepo.of({ photo })
    })
  )
}

import type { Account, CompanyId } from "../auth/Domain.ts"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { Role } from "../auth/Permissions.ts"

export type UserRow = Account

export interface ProfilePatch {
  readonly name?: string
  readonly lastname?: string | null
  readonly phone?: string | null
  readonly timezone?: string
  readonly locale?: string
  /** A stored image of an upload; null removes the photo. */
  readonly photo?: { readonly path: string; readonly mimeType: string } | null
}

/**
 * The signed-in account itself. Every method takes the user id the credential resolved
 * to, never an id from input, so no tenant predicate is needed: an account is not a
 * company's record. The one company id that comes from input (the switch) is checked
 * against the account's own memberships in the same statement.
 */
export class MeRepo extends Context.Service<MeRepo, {
  findUser(userId: number): Effect.Effect<UserRow>
  /**
   * A changed phone clears `phone_verified` in the same statement, so no reader sees a verified new
   * number; a changed photo bumps its version.
   */
  updateProfile(userId: number, patch: ProfilePatch, now: Date): Effect.Effect<UserRow>
  findPasswordHash(userId: number): Effect.Effect<string | null>
  /** New hash; every session and mobile token of the user ends except the caller's own one. */
  replacePassword(
    userId: number,
    passwordHash: string,
    keep: { readonly sessionId: string | null; readonly tokenId: number | null },
    now: Date
  ): Effect.Effect<ReadonlyArray<number>>
  /** Sets the status; answers the companies the user is a member of (whose colleagues see the change), when it changed. */
  setAvailability(userId: number, status: string, now: Date): Effect.Effect<ReadonlyArray<number>>
  /** Points `current_company_id` at a company the user belongs to; none when there is no such membership. */
  switchCompany(userId: number, companyId: CompanyId, now: Date): Effect.Effect<Option.Option<{ readonly role: Role }>>
}>()("crm/me/MeRepo") {
  static readonly layer = Layer.effect(
    MeRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, name, lastname, email, email_verified_at, phone, phone_verified, timezone, locale,
                          availability, is_service_account, current_company_id,
                          CASE WHEN photo_path IS NULL THEN NULL ELSE photo_version END AS photo_version`

      const findUser = (userId: number) =>
        sql<UserRow>`SELECT ${columns} FROM users WHERE id = ${userId}`.pipe(Effect.map((rows) => rows[0]), Effect.orDie)

      const updateProfile = (userId: number, patch: ProfilePatch, now: Date) => {
        const photoPath = patch.photo === undefined ? undefined : patch.photo?.path ?? null
        const sets = [
          ...(patch.name !== undefined ? [sql`name = ${patch.name}`] : []),
          ...(patch.lastname !== undefined ? [sql`lastname = ${patch.lastname}`] : []),
          ...(patch.timezone !== undefined ? [sql`timezone = ${patch.timezone}`] : []),
          ...(patch.locale !== undefined ? [sql`locale = ${patch.locale}`] : []),
          ...(patch.phone !== undefined
            ? [
              sql`phone = ${patch.phone}`,
              sql`phone_verified = (phone_verified AND phone IS NOT DISTINCT FROM ${patch.phone}::text)`
            ]
            : []),
          ...(photoPath !== undefined
            ? [
              sql`photo_path = ${photoPath}`,
              sql`photo_mime_type = ${patch.photo?.mimeType ?? null}`,
              sql`photo_version = photo_version + (CASE WHEN photo_path IS DISTINCT FROM ${photoPath}::text THEN 1 ELSE 0 END)`
            ]
            : []),
          sql`updated_at = ${now}`
        ]
        return sql<UserRow>`UPDATE users SET ${sql.csv(sets)} WHERE id = ${userId} RETURNING ${columns}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )
      }

      const findPasswordHash = (userId: number) =>
        sql<{ password_hash: string | null }>`SELECT password_hash FROM users WHERE id = ${userId}`.pipe(
          Effect.map((rows) => rows[0]?.password_hash ?? null),
          Effect.orDie
        )

      const replacePassword = (
        userId: number,
        passwordHash: string,
        keep: { readonly sessionId: string | null; readonly tokenId: number | null },
        now: Date
      ) =>
        Effect.gen(function*() {
          yield* sql`UPDATE users SET password_hash = ${passwordHash}, updated_at = ${now} WHERE id = ${userId}`
          yield* sql`DELETE FROM sessions WHERE user_id = ${userId} AND id IS DISTINCT FROM ${keep.sessionId}::text`
          yield* sql`DELETE FROM api_tokens WHERE user_id = ${userId} AND kind = 'mobile'
                     AND id IS DISTINCT FROM ${keep.tokenId}::bigint`
          const memberships = yield* sql<{ company_id: number }>`SELECT company_id FROM memberships WHERE user_id = ${userId}`
          return memberships.map((row) => row.company_id)
        }).pipe(sql.withTransaction, Effect.orDie)

      const setAvailability = (userId: number, status: string, now: Date) =>
        sql<{ company_id: number }>`
          WITH u AS (
            UPDATE users SET availability = ${status}, updated_at = ${now}
            WHERE id = ${userId} AND availability IS DISTINCT FROM ${status}
            RETURNING id
          )
          SELECT m.company_id FROM memberships m JOIN u ON u.id = m.user_id ORDER BY m.company_id`.pipe(
          Effect.map((rows) => rows.map((row) => row.company_id)),
          Effect.orDie
        )

      const switchCompany = (userId: number, companyId: CompanyId, now: Date) =>
        sql<{ role: Role }>`
          WITH m AS (SELECT role FROM memberships WHERE user_id = ${userId} AND company_id = ${companyId})
          UPDATE users SET current_company_id = ${companyId}, updated_at = ${now}
          WHERE id = ${userId} AND EXISTS (SELECT 1 FROM m)
          RETURNING (SELECT role FROM m) AS role`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      return MeRepo.of({ findUser, updateProfile, findPasswordHash, replacePassword, setAvailability, switchCompany })
    })
  )
}

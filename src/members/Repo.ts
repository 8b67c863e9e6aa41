import type { CompanyId } from "../auth/Domain.ts"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { Role } from "../auth/Permissions.ts"
import type { Member, User } from "./Domain.ts"

/** A person as the API shows them, less the signed photo link; `photo_version` is null without a photo. */
type WithPhotoVersion<A> = Omit<A, "photo_url"> & { readonly photo_version: number | null }
export type MemberRecord = WithPhotoVersion<Member>
export type UserRecord = WithPhotoVersion<User>

interface MemberRow {
  readonly id: number
  readonly name: string
  readonly lastname: string | null
  readonly email: string | null
  readonly role: string
  readonly availability: string
  readonly telephony_enabled: boolean
  readonly extension: string | null
  readonly photo_version: number | null
}

const view = ({ extension, telephony_enabled, ...row }: MemberRow): MemberRecord => ({
  ...row,
  telephony: { enabled: telephony_enabled, extension }
})

/** Memberships of real (non-service) users; the company id is in every statement. */
export class MembersRepo extends Context.Service<MembersRepo, {
  list(companyId: CompanyId): Effect.Effect<ReadonlyArray<MemberRecord>>
  find(companyId: CompanyId, userId: number): Effect.Effect<Option.Option<MemberRecord>>
  users(companyId: CompanyId): Effect.Effect<ReadonlyArray<UserRecord>>
  /** Serializes membership changes of one company until the transaction ends. */
  lockCompany(companyId: CompanyId): Effect.Effect<void>
  countAdmins(companyId: CompanyId): Effect.Effect<number>
  setRole(companyId: CompanyId, userId: number, role: Role): Effect.Effect<void>
  /**
   * Ends the membership with what hangs off it in the company (team seats, SIP
   * profile row), and moves the user's active company elsewhere when it was this one.
   */
  remove(companyId: CompanyId, userId: number): Effect.Effect<void>
}>()("crm/members/MembersRepo") {
  static readonly layer = Layer.effect(
    MembersRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const photoVersion = sql`CASE WHEN u.photo_path IS NULL THEN NULL ELSE u.photo_version END AS photo_version`
      const select = (companyId: CompanyId) =>
        sql`
          SELECT u.id, u.name, u.lastname, u.email, m.role, u.availability,
                 (t.user_id IS NOT NULL) AS telephony_enabled, t.extension, ${photoVersion}
          FROM memberships m
          JOIN users u ON u.id = m.user_id AND NOT u.is_service_account
          LEFT JOIN telephony_operators t ON t.company_id = ${companyId} AND t.user_id = u.id
          WHERE m.company_id = ${companyId}`

      const list = (companyId: CompanyId) =>
        sql<MemberRow>`${select(companyId)} ORDER BY u.id`.pipe(Effect.map((rows) => rows.map(view)), Effect.orDie)

      const find = (companyId: CompanyId, userId: number) =>
        sql<MemberRow>`${select(companyId)} AND m.user_id = ${userId}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), view)),
          Effect.orDie
        )

      const users = (companyId: CompanyId) =>
        sql<UserRecord>`
          SELECT u.id, u.name, u.lastname, u.email, m.role, ${photoVersion}
          FROM memberships m JOIN users u ON u.id = m.user_id AND NOT u.is_service_account
          WHERE m.company_id = ${companyId} ORDER BY u.id`.pipe(Effect.orDie)

      // NO KEY UPDATE: enough to serialize the admin checks, without blocking inserts that reference the company.
      const lockCompany = (companyId: CompanyId) =>
        sql`SELECT id FROM companies WHERE id = ${companyId} FOR NO KEY UPDATE`.pipe(Effect.asVoid, Effect.orDie)

      const countAdmins = (companyId: CompanyId) =>
        sql<{ n: number }>`
          SELECT count(*)::int AS n FROM memberships m
          JOIN users u ON u.id = m.user_id AND NOT u.is_service_account
          WHERE m.company_id = ${companyId} AND m.role = 'admin'`.pipe(Effect.map((rows) => rows[0].n), Effect.orDie)

      const setRole = (companyId: CompanyId, userId: number, role: Role) =>
        sql`UPDATE memberships SET role = ${role} WHERE company_id = ${companyId} AND user_id = ${userId}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const remove = (companyId: CompanyId, userId: number) =>
        Effect.gen(function*() {
          yield* sql`DELETE FROM memberships WHERE company_id = ${companyId} AND user_id = ${userId}`
          yield* sql`DELETE FROM team_members WHERE company_id = ${companyId} AND user_id = ${userId}`
          yield* sql`DELETE FROM telephony_operators WHERE company_id = ${companyId} AND user_id = ${userId}`
          yield* sql`
            UPDATE users SET updated_at = now(), current_company_id = (
              SELECT company_id FROM memberships WHERE user_id = ${userId} ORDER BY created_at, company_id LIMIT 1
            )
            WHERE id = ${userId} AND current_company_id = ${companyId}`
        }).pipe(Effect.orDie)

      return MembersRepo.of({ list, find, users, lockCompany, countAdmins, setRole, remove })
    })
  )
}

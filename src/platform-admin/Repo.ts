import type { CompanyId } from "../auth/Domain.ts"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import type { CompanyView } from "./Domain.ts"

interface CompanyRow {
  readonly id: number
  readonly name: string
  readonly plan: string
  readonly status: string
  readonly default_currency: string | null
  readonly default_country: string | null
  readonly telephony_enabled: boolean
  readonly created_at: Date
}

const view = (row: CompanyRow): CompanyView => ({ ...row, created_at: row.created_at.toISOString() })

/** Provisioning queries; the company id is the tenant key and comes first. */
export class PlatformRepo extends Context.Service<PlatformRepo, {
  insertCompany(input: {
    readonly name: string
    readonly plan: string
    readonly default_currency: string | null
    readonly default_country: string | null
    readonly telephony_enabled: boolean
  }): Effect.Effect<CompanyView, SqlError.SqlError>
  listCompanies(offset: number, limit: number): Effect.Effect<{ readonly items: ReadonlyArray<CompanyView>; readonly total: number }, SqlError.SqlError>
  findCompany(companyId: CompanyId): Effect.Effect<Option.Option<CompanyView>, SqlError.SqlError>
  updateCompany(companyId: CompanyId, patch: Record<string, unknown>): Effect.Effect<Option.Option<CompanyView>, SqlError.SqlError>
  /** Existing account by e-mail, or a new one; never changes an existing password. */
  upsertUser(input: { readonly email: string; readonly name: string; readonly password_hash: string }): Effect.Effect<{ readonly id: number; readonly email: string }, SqlError.SqlError>
  findUserByEmail(email: string): Effect.Effect<Option.Option<{ readonly id: number; readonly email: string; readonly is_service_account: boolean }>, SqlError.SqlError>
  addMembership(companyId: CompanyId, userId: number, role: string): Effect.Effect<void, SqlError.SqlError>
}>()("crm/platform-admin/PlatformRepo") {
  static readonly layer = Layer.effect(
    PlatformRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, name, plan, status, default_currency, default_country, telephony_enabled, created_at`
      return PlatformRepo.of({
        insertCompany: (input) =>
          sql<CompanyRow>`INSERT INTO companies ${sql.insert(input)} RETURNING ${columns}`.pipe(
            Effect.map((rows) => view(rows[0]))
          ),
        listCompanies: (offset, limit) =>
          Effect.all({
            items: sql<CompanyRow>`SELECT ${columns} FROM companies ORDER BY id LIMIT ${limit} OFFSET ${offset}`.pipe(
              Effect.map((rows) => rows.map(view))
            ),
            total: sql<{ n: number }>`SELECT count(*)::int AS n FROM companies`.pipe(Effect.map((rows) => rows[0].n))
          }),
        findCompany: (companyId) =>
          sql<CompanyRow>`SELECT ${columns} FROM companies WHERE id = ${companyId}`.pipe(
            Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), view))
          ),
        updateCompany: (companyId, patch) =>
          sql<CompanyRow>`
            UPDATE companies SET ${sql.update({ ...patch, updated_at: new Date() })}
            WHERE id = ${companyId} RETURNING ${columns}`.pipe(
            Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), view))
          ),
        upsertUser: (input) =>
          sql<{ id: number; email: string }>`
            INSERT INTO users (email, name, password_hash) VALUES (${input.email}, ${input.name}, ${input.password_hash})
            ON CONFLICT (lower(email)) WHERE email IS NOT NULL DO UPDATE SET updated_at = users.updated_at
            RETURNING id, email`.pipe(Effect.map((rows) => rows[0])),
        findUserByEmail: (email) =>
          sql<{ id: number; email: string; is_service_account: boolean }>`
            SELECT id, email, is_service_account FROM users WHERE lower(email) = lower(${email})`.pipe(
            Effect.map((rows) => Option.fromNullishOr(rows[0]))
          ),
        addMembership: (companyId, userId, role) =>
          Effect.gen(function*() {
            yield* sql`
              INSERT INTO memberships (company_id, user_id, role) VALUES (${companyId}, ${userId}, ${role})
              ON CONFLICT (company_id, user_id) DO UPDATE SET role = EXCLUDED.role`
            yield* sql`UPDATE users SET current_company_id = ${companyId} WHERE id = ${userId} AND current_company_id IS NULL`
          })
      })
    })
  )
}

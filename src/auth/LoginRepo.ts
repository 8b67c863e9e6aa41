import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"

export interface LoginUser {
  readonly id: number
  readonly email: string
  readonly name: string
  readonly password_hash: string | null
  readonly is_service_account: boolean
  readonly email_verified_at: Date | null
  readonly has_membership: boolean
}

export interface CodeAttempt {
  readonly code_hash: Uint8Array
  readonly attempts: number
}

/**
 * Login, sessions and e-mail codes. Keyed by user, not by company: these are the
 * queries that establish who the caller is before any tenant is known.
 */
export class LoginRepo extends Context.Service<LoginRepo, {
  findByEmail(email: string): Effect.Effect<Option.Option<LoginUser>>
  /** Points a stale or empty `current_company_id` at the account's oldest membership. */
  repairCurrentCompany(userId: number): Effect.Effect<void>
  insertSession(row: { readonly id: string; readonly user_id: number; readonly csrf_token: string; readonly expires_at: Date }): Effect.Effect<void>
  deleteSession(sessionId: string): Effect.Effect<void>
  revokeMobileToken(userId: number, tokenId: number): Effect.Effect<void>
  findEmail(userId: number): Effect.Effect<Option.Option<{ readonly email: string | null; readonly email_verified_at: Date | null }>>
  /**
   * Stores a new code unless the current one expires after `replaceableUntil`, i.e. was
   * issued too recently: the resend throttle, decided atomically by the row itself.
   * `true` when the code was stored.
   */
  replaceCode(userId: number, codeHash: Uint8Array, expiresAt: Date, replaceableUntil: Date): Effect.Effect<boolean>
  /** The current code's expiry, from which the time of the next allowed resend follows. */
  findCodeExpiry(userId: number): Effect.Effect<Option.Option<Date>>
  /** Spends one attempt of a live code before it is compared, so parallel guesses cannot exceed the limit. */
  spendAttempt(userId: number, now: Date, maxAttempts: number): Effect.Effect<Option.Option<CodeAttempt>>
  markVerified(userId: number, now: Date): Effect.Effect<void>
}>()("crm/auth/LoginRepo") {
  static readonly layer = Layer.effect(
    LoginRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return LoginRepo.of({
        findByEmail: (email) =>
          sql<LoginUser>`
            SELECT u.id, u.email, u.name, u.password_hash, u.is_service_account, u.email_verified_at,
                   EXISTS (SELECT 1 FROM memberships m WHERE m.user_id = u.id) AS has_membership
            FROM users u WHERE lower(u.email) = lower(${email})`.pipe(
            Effect.map((rows) => Option.fromNullishOr(rows[0])),
            Effect.orDie
          ),
        repairCurrentCompany: (userId) =>
          sql`
            UPDATE users u SET current_company_id = (
              SELECT m.company_id FROM memberships m WHERE m.user_id = u.id ORDER BY m.created_at, m.company_id LIMIT 1
            )
            WHERE u.id = ${userId} AND NOT EXISTS (
              SELECT 1 FROM memberships m WHERE m.user_id = u.id AND m.company_id = u.current_company_id
            )`.pipe(Effect.asVoid, Effect.orDie),
        insertSession: (row) =>
          sql`INSERT INTO sessions (id, user_id, csrf_token, expires_at)
              VALUES (${row.id}, ${row.user_id}, ${row.csrf_token}, ${row.expires_at})`.pipe(Effect.asVoid, Effect.orDie),
        deleteSession: (sessionId) => sql`DELETE FROM sessions WHERE id = ${sessionId}`.pipe(Effect.asVoid, Effect.orDie),
        revokeMobileToken: (userId, tokenId) =>
          sql`DELETE FROM api_tokens WHERE id = ${tokenId} AND user_id = ${userId} AND kind = 'mobile'`.pipe(
            Effect.asVoid,
            Effect.orDie
          ),
        findEmail: (userId) =>
          sql<{ email: string | null; email_verified_at: Date | null }>`
            SELECT email, email_verified_at FROM users WHERE id = ${userId}`.pipe(
            Effect.map((rows) => Option.fromNullishOr(rows[0])),
            Effect.orDie
          ),
        replaceCode: (userId, codeHash, expiresAt, replaceableUntil) =>
          sql<{ user_id: number }>`
            INSERT INTO email_codes (user_id, code_hash, attempts, expires_at)
            VALUES (${userId}, ${codeHash}, 0, ${expiresAt})
            ON CONFLICT (user_id) DO UPDATE SET code_hash = EXCLUDED.code_hash, attempts = 0, expires_at = EXCLUDED.expires_at
            WHERE email_codes.expires_at <= ${replaceableUntil}
            RETURNING user_id`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),
        findCodeExpiry: (userId) =>
          sql<{ expires_at: Date }>`SELECT expires_at FROM email_codes WHERE user_id = ${userId}`.pipe(
            Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => row.expires_at)),
            Effect.orDie
          ),
        spendAttempt: (userId, now, maxAttempts) =>
          sql<CodeAttempt>`
            UPDATE email_codes SET attempts = attempts + 1
            WHERE user_id = ${userId} AND attempts < ${maxAttempts} AND expires_at > ${now}
            RETURNING code_hash, attempts`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])), Effect.orDie),
        markVerified: (userId, now) =>
          Effect.gen(function*() {
            yield* sql`UPDATE users SET email_verified_at = ${now}, updated_at = ${now}
                       WHERE id = ${userId} AND email_verified_at IS NULL`
            yield* sql`DELETE FROM email_codes WHERE user_id = ${userId}`
          }).pipe(sql.withTransaction, Effect.orDie)
      })
    })
  )
}

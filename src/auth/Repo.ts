import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { Account } from "./Domain.ts"
import type { Role } from "./Permissions.ts"
import type { Plan } from "./Plans.ts"

export interface CredentialRow extends Account {
  readonly user_id: number
  readonly company_id: number | null
  readonly plan: Plan | null
  readonly default_country: string | null
  readonly role: Role | null
}

export interface TokenRow extends CredentialRow {
  readonly token_id: number
  readonly kind: "service" | "mobile"
  readonly secret_hash: Uint8Array
  readonly abilities: ReadonlyArray<string>
  readonly expires_at: Date | null
}

export interface SessionRow extends CredentialRow {
  readonly session_id: string
  readonly csrf_token: string
  readonly expires_at: Date
}

/**
 * Credential lookups. Not tenant-scoped by design: they are what establishes the tenant.
 * A suspended company is no active company: its members get 403 until the operator reactivates it.
 */
export class AuthRepo extends Context.Service<AuthRepo, {
  findToken(tokenId: number): Effect.Effect<Option.Option<TokenRow>>
  touchToken(tokenId: number, now: Date, expiresAt: Date | null): Effect.Effect<void>
  findSession(sessionId: string): Effect.Effect<Option.Option<SessionRow>>
}>()("crm/auth/AuthRepo") {
  static readonly layer = Layer.effect(
    AuthRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const account = sql`u.id, u.id AS user_id, u.name, u.lastname, u.email, u.email_verified_at, u.phone, u.phone_verified,
        u.timezone, u.locale, u.availability, u.is_service_account, u.current_company_id,
        CASE WHEN u.photo_path IS NULL THEN NULL ELSE u.photo_version END AS photo_version`
      // A service token is bound to its own company; a person's credential follows current_company_id.
      const findToken = (tokenId: number) =>
        sql<TokenRow>`
          SELECT t.id AS token_id, t.kind, t.secret_hash, t.abilities, t.expires_at, ${account},
                 m.company_id, c.plan, c.default_country, m.role
          FROM api_tokens t
          JOIN users u ON u.id = t.user_id
          LEFT JOIN memberships m ON m.user_id = u.id
            AND m.company_id = CASE WHEN t.kind = 'service' THEN t.company_id ELSE u.current_company_id END
          LEFT JOIN companies c ON c.id = m.company_id AND c.status = 'active'
          WHERE t.id = ${tokenId}`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])), Effect.orDie)
      const touchToken = (tokenId: number, now: Date, expiresAt: Date | null) =>
        sql`UPDATE api_tokens SET last_used_at = ${now}, expires_at = COALESCE(${expiresAt}, expires_at) WHERE id = ${tokenId}`
          .pipe(Effect.asVoid, Effect.orDie)
      const findSession = (sessionId: string) =>
        sql<SessionRow>`
          SELECT s.id AS session_id, s.csrf_token, s.expires_at, ${account},
                 m.company_id, c.plan, c.default_country, m.role
          FROM sessions s
          JOIN users u ON u.id = s.user_id
          LEFT JOIN memberships m ON m.user_id = u.id AND m.company_id = u.current_company_id
          LEFT JOIN companies c ON c.id = m.company_id AND c.status = 'active'
          WHERE s.id = ${sessionId}`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])), Effect.orDie)
      return AuthRepo.of({ findToken, touchToken, findSession })
    })
  )
}

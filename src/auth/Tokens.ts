import { Clock, Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "../platform/Config.ts"
import { randomToken, sha256 } from "../platform/Crypto.ts"

export interface IssuedToken {
  readonly id: number
  /** `<id>|<secret>`: shown once, only its SHA-256 is stored. */
  readonly plaintext: string
}

export class Tokens extends Context.Service<Tokens, {
  /** A new service account (admin of the company) and its never-expiring token. */
  createServiceToken(
    companyId: number,
    input: { readonly name: string; readonly description: string }
  ): Effect.Effect<IssuedToken & { readonly userId: number }>
  /** `mobile:<device>`: replaces the user's earlier token of the same device name. */
  issueMobileToken(userId: number, deviceName: string): Effect.Effect<IssuedToken>
}>()("crm/auth/Tokens") {
  static readonly layer = Layer.effect(
    Tokens,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const config = yield* AppConfig

      const insertToken = (row: {
        user_id: number
        company_id: number | null
        kind: "service" | "mobile"
        name: string
        description: string
        abilities: ReadonlyArray<string>
        expires_at: Date | null
      }) =>
        Effect.gen(function*() {
          const secret = randomToken(40)
          const [{ id }] = yield* sql<{ id: number }>`
            INSERT INTO api_tokens (user_id, company_id, kind, name, description, secret_hash, abilities, expires_at)
            VALUES (${row.user_id}, ${row.company_id}, ${row.kind}, ${row.name}, ${row.description},
                    ${sha256(secret)}, ${row.abilities as Array<string>}, ${row.expires_at})
            RETURNING id`
          return { id, plaintext: `${id}|${secret}` }
        })

      const createServiceToken = (companyId: number, input: { readonly name: string; readonly description: string }) =>
        sql.withTransaction(Effect.gen(function*() {
          const [{ id: userId }] = yield* sql<{ id: number }>`
            INSERT INTO users (name, is_service_account, current_company_id)
            VALUES (${input.name}, true, ${companyId}) RETURNING id`
          yield* sql`INSERT INTO memberships (company_id, user_id, role) VALUES (${companyId}, ${userId}, 'admin')`
          const token = yield* insertToken({
            user_id: userId,
            company_id: companyId,
            kind: "service",
            name: input.name,
            description: input.description,
            abilities: ["*"],
            expires_at: null
          })
          return { ...token, userId }
        })).pipe(Effect.orDie)

      const issueMobileToken = (userId: number, deviceName: string) =>
        sql.withTransaction(Effect.gen(function*() {
          const name = `mobile:${deviceName}`
          const now = yield* Clock.currentTimeMillis
          yield* sql`DELETE FROM api_tokens WHERE user_id = ${userId} AND kind = 'mobile' AND name = ${name}`
          return yield* insertToken({
            user_id: userId,
            company_id: null,
            kind: "mobile",
            name,
            description: "",
            abilities: ["*", "broadcasting:connect"],
            expires_at: new Date(now + config.mobileTokenDays * 86_400_000)
          })
        })).pipe(Effect.orDie)

      return Tokens.of({ createServiceToken, issueMobileToken })
    })
  )
}

import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"

export interface UserRow {
  readonly id: number
  readonly name: string
  readonly lastname: string | null
  readonly email: string | null
  readonly email_verified_at: Date | null
  readonly phone: string | null
  readonly phone_verified: boolean
  readonly timezone: string
  readonly locale: string
  readonly availability: string
  readonly is_service_account: boolean
  readonly current_company_id: number | null
}

export class MeRepo extends Context.Service<MeRepo, {
  /** The signed-in account itself: the user id comes from the credential, never from input. */
  findUser(userId: number): Effect.Effect<UserRow>
}>()("crm/me/MeRepo") {
  static readonly layer = Layer.effect(
    MeRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return MeRepo.of({
        findUser: (userId) =>
          sql<UserRow>`
            SELECT id, name, lastname, email, email_verified_at, phone, phone_verified, timezone, locale,
                   availability, is_service_account, current_company_id
            FROM users WHERE id = ${userId}`.pipe(Effect.map((rows) => rows[0]), Effect.orDie)
      })
    })
  )
}

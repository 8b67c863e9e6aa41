import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, SqlError } from "effect/sql"

export interface PendingCode {
  readonly phone: string
  readonly code_hash: Uint8Array
  readonly attempts: number
  readonly sent_at: Date
  readonly expires_at: Date
}

/**
 * Phone verification state of the signed-in account (keyed by the credential's user id,
 * like the rest of `me`), plus the platform-wide daily SMS budget.
 */
export class PhoneRepo extends Context.Service<PhoneRepo, {
  /** Runs `effect` in one transaction holding the user's row lock, so one account's sends are serialized. */
  atomically<A, E, R>(userId: number, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R>
  findPhone(userId: number): Effect.Effect<string | null>
  /** Send times of the user since `since`, oldest first. */
  recentSends(userId: number, since: Date): Effect.Effect<ReadonlyArray<Date>>
  /** Logs a send and forgets the ones older than `forgetBefore`. */
  recordSend(userId: number, at: Date, forgetBefore: Date): Effect.Effect<void>
  /** Takes one unit of the day's budget; false when it is spent. */
  reserveBudget(day: string, budget: number): Effect.Effect<boolean>
  releaseBudget(day: string): Effect.Effect<void>
  /** Replaces any earlier code of the user. */
  saveCode(userId: number, code: PendingCode): Effect.Effect<void>
  dropCode(userId: number, codeHash: Uint8Array): Effect.Effect<void>
  findCode(userId: number): Effect.Effect<Option.Option<PendingCode>>
  /** Spends one attempt of a live code before it is compared, so parallel guesses cannot exceed the limit. */
  spendAttempt(userId: number, now: Date, maxAttempts: number): Effect.Effect<Option.Option<PendingCode>>
  /** Marks the number verified if it is still the saved one, and drops the code; false when it changed. */
  markVerified(userId: number, phone: string, now: Date): Effect.Effect<boolean>
}>()("crm/me/PhoneRepo") {
  static readonly layer = Layer.effect(
    PhoneRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const codeColumns = sql`phone, code_hash, attempts, sent_at, expires_at`
      const firstOption = <A>(rows: ReadonlyArray<A>) => Option.fromNullishOr(rows[0])

      const atomically = <A, E, R>(userId: number, effect: Effect.Effect<A, E, R>) =>
        sql.withTransaction(Effect.andThen(sql`SELECT id FROM users WHERE id = ${userId} FOR UPDATE`, effect)).pipe(
          Effect.catch((error) => SqlError.isSqlError(error) ? Effect.die(error) : Effect.fail(error as E))
        )

      return PhoneRepo.of({
        atomically,
        findPhone: (userId) =>
          sql<{ phone: string | null }>`SELECT phone FROM users WHERE id = ${userId}`.pipe(
            Effect.map((rows) => rows[0]?.phone ?? null),
            Effect.orDie
          ),
        recentSends: (userId, since) =>
          sql<{ sent_at: Date }>`
            SELECT sent_at FROM phone_code_sends WHERE user_id = ${userId} AND sent_at > ${since} ORDER BY sent_at`.pipe(
            Effect.map((rows) => rows.map((row) => row.sent_at)),
            Effect.orDie
          ),
        recordSend: (userId, at, forgetBefore) =>
          Effect.gen(function*() {
            yield* sql`DELETE FROM phone_code_sends WHERE user_id = ${userId} AND sent_at <= ${forgetBefore}`
            yield* sql`INSERT INTO phone_code_sends (user_id, sent_at) VALUES (${userId}, ${at})`
          }).pipe(Effect.orDie),
        reserveBudget: (day, budget) =>
          sql<{ used: number }>`
            INSERT INTO sms_daily_usage (day, used) VALUES (${day}::date, 1)
            ON CONFLICT (day) DO UPDATE SET used = sms_daily_usage.used + 1 WHERE sms_daily_usage.used < ${budget}
            RETURNING used`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),
        releaseBudget: (day) =>
          sql`UPDATE sms_daily_usage SET used = used - 1 WHERE day = ${day}::date AND used > 0`.pipe(
            Effect.asVoid,
            Effect.orDie
          ),
        saveCode: (userId, code) =>
          sql`
            INSERT INTO phone_codes (user_id, phone, code_hash, attempts, sent_at, expires_at)
            VALUES (${userId}, ${code.phone}, ${code.code_hash}, ${code.attempts}, ${code.sent_at}, ${code.expires_at})
            ON CONFLICT (user_id) DO UPDATE SET phone = EXCLUDED.phone, code_hash = EXCLUDED.code_hash,
              attempts = EXCLUDED.attempts, sent_at = EXCLUDED.sent_at, expires_at = EXCLUDED.expires_at`.pipe(
            Effect.asVoid,
            Effect.orDie
          ),
        dropCode: (userId, codeHash) =>
          sql`DELETE FROM phone_codes WHERE user_id = ${userId} AND code_hash = ${codeHash}`.pipe(
            Effect.asVoid,
            Effect.orDie
          ),
        findCode: (userId) =>
          sql<PendingCode>`SELECT ${codeColumns} FROM phone_codes WHERE user_id = ${userId}`.pipe(
            Effect.map(firstOption),
            Effect.orDie
          ),
        spendAttempt: (userId, now, maxAttempts) =>
          sql<PendingCode>`
            UPDATE phone_codes SET attempts = attempts + 1
            WHERE user_id = ${userId} AND attempts < ${maxAttempts} AND expires_at > ${now}
            RETURNING ${codeColumns}`.pipe(Effect.map(firstOption), Effect.orDie),
        markVerified: (userId, phone, now) =>
          Effect.gen(function*() {
            const rows = yield* sql`
              UPDATE users SET phone_verified = true, updated_at = ${now}
              WHERE id = ${userId} AND phone = ${phone} RETURNING id`
            if (rows.length === 0) return false
            yield* sql`DELETE FROM phone_codes WHERE user_id = ${userId}`
            return true
          }).pipe(sql.withTransaction, Effect.orDie)
      })
    })
  )
}

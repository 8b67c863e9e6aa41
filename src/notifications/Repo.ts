import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { StoredPreferences } from "./Domain.ts"

/**
 * Preferences belong to the person, not to a company: keyed by the user id that the
 * credential resolved to, never by an id from input.
 */
export class NotificationsRepo extends Context.Service<NotificationsRepo, {
  /** The stored document (raw jsonb), or undefined when the user never saved one. */
  find(userId: number, options?: { readonly forUpdate?: boolean }): Effect.Effect<unknown>
  save(userId: number, preferences: StoredPreferences, now: Date): Effect.Effect<void>
}>()("crm/notifications/NotificationsRepo") {
  static readonly layer = Layer.effect(
    NotificationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return NotificationsRepo.of({
        find: (userId, options) =>
          sql<{ preferences: unknown }>`
            SELECT preferences FROM notification_preferences WHERE user_id = ${userId}
            ${options?.forUpdate === true ? sql`FOR UPDATE` : sql``}`.pipe(
            Effect.map((rows) => rows[0]?.preferences),
            Effect.orDie
          ),
        save: (userId, preferences, now) =>
          sql`
            INSERT INTO notification_preferences (user_id, preferences, updated_at)
            VALUES (${userId}, ${JSON.stringify(preferences)}::jsonb, ${now})
            ON CONFLICT (user_id) DO UPDATE SET preferences = EXCLUDED.preferences, updated_at = EXCLUDED.updated_at`
            .pipe(Effect.asVoid, Effect.orDie)
      })
    })
  )
}

import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { decideDelivery } from "../notifications/Delivery.ts"
import { NotificationPreferences } from "../notifications/NotificationPreferences.ts"

/**
 * In-app notifications of deal tasks. The event carries `user_id`, so the realtime dispatcher
 * also sends it to `private-user.{id}`. An in-app notice counts as a push for the recipient's
 * preferences: `channels.push = false` and quiet hours (in their timezone) hold it back.
 */
export class TaskNotifier extends Context.Service<TaskNotifier, {
  /** Emits in the caller's transaction; false when the recipient's preferences hold it back. */
  notify(companyId: CompanyId, userId: number, key: string, payload: Record<string, unknown>, now: Date): Effect.Effect<boolean>
}>()("crm/deals/TaskNotifier") {
  static readonly layerNoDeps = Layer.effect(
    TaskNotifier,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const events = yield* Events
      const preferences = yield* NotificationPreferences

      const notify = Effect.fnUntraced(function*(companyId: CompanyId, userId: number, key: string, payload: Record<string, unknown>, now: Date) {
        const rows = yield* sql<{ timezone: string }>`
          SELECT u.timezone FROM users u JOIN memberships m ON m.user_id = u.id AND m.company_id = ${companyId}
          WHERE u.id = ${userId}`.pipe(Effect.orDie)
        if (rows.length === 0) return false
        const prefs = yield* preferences.forUser(userId)
        if (!decideDelivery(prefs, { kind: "push", userTimezone: rows[0].timezone, now }).deliver) return false
        yield* events.emit(companyId, key, { ...payload, user_id: userId })
        return true
      })

      return TaskNotifier.of({ notify })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(NotificationPreferences.layer))
}

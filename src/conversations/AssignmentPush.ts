import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { decideDelivery } from "../notifications/Delivery.ts"
import { NotificationPreferences } from "../notifications/NotificationPreferences.ts"

/**
 * The `conversation_assigned` push trigger: whether a new assignee is told on their private-user
 * channel, by their preferences (the trigger, `channels.push`) and quiet hours in their timezone.
 */
export class AssignmentPush extends Context.Service<AssignmentPush, {
  allowed(companyId: CompanyId, userId: number, now: Date): Effect.Effect<boolean>
}>()("crm/conversations/AssignmentPush") {
  static readonly layer = Layer.effect(
    AssignmentPush,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const preferences = yield* NotificationPreferences
      const allowed = Effect.fnUntraced(function*(companyId: CompanyId, userId: number, now: Date) {
        const rows = yield* sql<{ timezone: string }>`
          SELECT u.timezone FROM users u JOIN memberships m ON m.user_id = u.id AND m.company_id = ${companyId}
          WHERE u.id = ${userId}`.pipe(Effect.orDie)
        if (rows.length === 0) return false
        const prefs = yield* preferences.forUser(userId)
        return decideDelivery(prefs, { kind: "push", trigger: "conversation_assigned", userTimezone: rows[0].timezone, now }).deliver
      })
      return AssignmentPush.of({ allowed })
    })
  ).pipe(Layer.provide(NotificationPreferences.layer))
}

import { Clock, Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { CurrentActor } from "../auth/Domain.ts"
import { invalidFields, type Unprocessable } from "../platform/Errors.ts"
import {
  type CategoryKey,
  fixedCategories,
  mergePreferences,
  type NotificationPreferences as Snapshot,
  type PreferencesPatch,
  readStored,
  resolvePreferences
} from "./Domain.ts"
import { NotificationsRepo } from "./Repo.ts"

const invalid = invalidFields

export class NotificationPreferences extends Context.Service<NotificationPreferences, {
  readonly get: Effect.Effect<Snapshot, never, CurrentActor>
  update(patch: PreferencesPatch): Effect.Effect<Snapshot, Unprocessable, CurrentActor>
  /** For senders: the recipient's snapshot, to feed `decideDelivery`. */
  forUser(userId: number): Effect.Effect<Snapshot>
}>()("crm/notifications/NotificationPreferences") {
  static readonly layerNoDeps = Layer.effect(
    NotificationPreferences,
    Effect.gen(function*() {
      const repo = yield* NotificationsRepo
      const sql = yield* SqlClient.SqlClient

      const forUser = Effect.fn("NotificationPreferences.forUser")(function*(userId: number) {
        return resolvePreferences(readStored(yield* repo.find(userId)))
      })

      const get = Effect.gen(function*() {
        const actor = yield* CurrentActor
        return yield* forUser(actor.userId)
      })

      const update = Effect.fn("NotificationPreferences.update")(
        function*(patch: PreferencesPatch) {
          const actor = yield* CurrentActor
          const errors: Record<string, Array<string>> = {}
          for (const [key, value] of Object.entries(patch.categories ?? {})) {
            if (value?.enabled === false && fixedCategories.has(key as CategoryKey)) {
              errors[`categories.${key}.enabled`] = [`The ${key} category cannot be turned off.`]
            }
          }
          const stored = readStored(yield* repo.find(actor.userId, { forUpdate: true }))
          const merged = mergePreferences(stored, patch)
          const snapshot = resolvePreferences(merged)
          if (snapshot.quiet_hours.enabled) {
            if (snapshot.quiet_hours.start === null) {
              errors["quiet_hours.start"] = ["The start time is required when quiet hours are enabled."]
            }
            if (snapshot.quiet_hours.end === null) {
              errors["quiet_hours.end"] = ["The end time is required when quiet hours are enabled."]
            }
          }
          if (Object.keys(errors).length > 0) return yield* invalid(errors)
          yield* repo.save(actor.userId, merged, new Date(yield* Clock.currentTimeMillis))
          return snapshot
        },
        sql.withTransaction,
        Effect.catchTag("SqlError", Effect.die)
      )

      return NotificationPreferences.of({ get, update, forUser })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(NotificationsRepo.layer))
}

import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { NotificationPreferences } from "./NotificationPreferences.ts"

export const NotificationsHttp = HttpApiBuilder.group(Api, "notificationPreferences", Effect.fn(function*(handlers) {
  const preferences = yield* NotificationPreferences
  return handlers
    .handle("get", () => Effect.map(preferences.get, (data) => ({ data })))
    .handle("update", ({ payload }) => Effect.map(preferences.update(payload), (data) => ({ data })))
})).pipe(Layer.provide(NotificationPreferences.layer))

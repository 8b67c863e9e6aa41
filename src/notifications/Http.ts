import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { NotificationPreferences } from "./NotificationPreferences.ts"
import { data } from "../platform/Envelope.ts"

export const NotificationsHttp = HttpApiBuilder.group(Api, "notificationPreferences", Effect.fn(function*(handlers) {
  const preferences = yield* NotificationPreferences
  return handlers
    .handle("get", () => data(preferences.get))
    .handle("update", ({ payload }) => data(preferences.update(payload)))
})).pipe(Layer.provide(NotificationPreferences.layer))

import { HttpApi, HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { AuthErrors, Unprocessable } from "../platform/Errors.ts"
import { NotificationPreferences, PreferencesPatch } from "./Domain.ts"
import { Data } from "../platform/Envelope.ts"

const Snapshot = Data(NotificationPreferences)

export class NotificationsApi extends HttpApiGroup.make("notificationPreferences")
  .add(
    HttpApiEndpoint.get("get", "/v1/me/notification-preferences", {
      success: Snapshot,
      error: AuthErrors
    }),
    HttpApiEndpoint.put("update", "/v1/me/notification-preferences", {
      payload: PreferencesPatch,
      success: Snapshot,
      error: [...AuthErrors, Unprocessable]
    })
      // A misspelt key would otherwise be dropped silently and the user's change lost.
      .annotate(HttpApi.PayloadParseOptions, { errors: "all", onExcessProperty: "error" })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Notification preferences",
    description: "The signed-in user's channels, categories, push triggers and quiet hours; PUT merges partially."
  }))
{}

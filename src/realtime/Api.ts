import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { AuthErrors, Unprocessable } from "../platform/Errors.ts"
import { BroadcastingAuth, BroadcastingAuthRequest } from "./Domain.ts"

export class RealtimeAuthApi extends HttpApiGroup.make("realtimeAuth")
  .add(
    HttpApiEndpoint.post("auth", "/v1/broadcasting/auth", {
      // pusher-js's default authorizer posts a form; other clients send JSON.
      payload: [BroadcastingAuthRequest, BroadcastingAuthRequest.pipe(HttpApiSchema.asFormUrlEncoded())],
      success: BroadcastingAuth,
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      summary: "Authorize a realtime channel subscription",
      description:
        "Signs `private-company.{id}` for the caller's active company and `private-user.{id}` for the caller. Needs a session or a token with ability `broadcasting:connect` (or `*`)."
    }))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Broadcasting", description: "Realtime (Pusher protocol) channel authorization" }))
{}

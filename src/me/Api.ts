import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { AuthErrors } from "../platform/Errors.ts"
import { Profile } from "./Domain.ts"

export class MeApi extends HttpApiGroup.make("me")
  .add(
    HttpApiEndpoint.get("get", "/v1/me", {
      success: Schema.Struct({ data: Profile }),
      error: AuthErrors
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Current user" }))
{}

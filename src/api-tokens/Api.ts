import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication, PlanGate, requiresFeature } from "../auth/Middleware.ts"
import { AuthErrors, NotFound } from "../platform/Errors.ts"
import { ApiToken, ApiTokenId, CreateApiToken, CreatedApiToken, UpdateApiToken } from "./Domain.ts"
import { Data } from "../platform/Envelope.ts"

const TokenParams = { id: ApiTokenId }

export class ApiTokensApi extends HttpApiGroup.make("apiTokens")
  .add(
    HttpApiEndpoint.get("list", "/v1/api-tokens", {
      success: Data(Schema.Array(ApiToken)),
      error: AuthErrors
    }),
    HttpApiEndpoint.post("create", "/v1/api-tokens", {
      payload: CreateApiToken,
      success: Data(CreatedApiToken).pipe(HttpApiSchema.status(201)),
      error: AuthErrors
    }),
    HttpApiEndpoint.get("get", "/v1/api-tokens/:id", {
      params: TokenParams,
      success: Data(ApiToken),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.patch("update", "/v1/api-tokens/:id", {
      params: TokenParams,
      payload: UpdateApiToken,
      success: Data(ApiToken),
      error: [...AuthErrors, NotFound]
    })
  )
  .middleware(PlanGate)
  .annotateEndpointsMerge(requiresFeature("api"))
  // Added after the gate: a company that lost the feature can still revoke the tokens it has.
  .add(
    HttpApiEndpoint.delete("revoke", "/v1/api-tokens/:id", {
      params: TokenParams,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, NotFound]
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "API tokens",
    description: "Service-account tokens of the company (plan feature `api`). Revoking removes the service account, and works without the feature."
  }))
{}

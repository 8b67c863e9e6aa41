import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, NotFound, Unprocessable } from "../platform/Errors.ts"
import {
  CreateIntegration,
  Integration,
  IntegrationWithSecret,
  IntegrationId,
  IntegrationStatus,
  IntegrationType,
  LogEntry,
  Provider,
  SummaryItem,
  TestWebhookInput,
  TestWebhookResult,
  UpdateIntegration
} from "./Domain.ts"

const Params = { integration: IntegrationId }

export class IntegrationsApi extends HttpApiGroup.make("integrations")
  .add(
    HttpApiEndpoint.get("list", "/v1/integrations", {
      query: { type: Schema.optional(IntegrationType), status: Schema.optional(IntegrationStatus) },
      success: Data(Schema.Array(Integration)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.post("create", "/v1/integrations", {
      payload: CreateIntegration,
      success: Data(IntegrationWithSecret).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.get("summary", "/v1/integrations/summary", {
      success: Data(Schema.Array(SummaryItem)),
      error: AuthErrors
    }),
    HttpApiEndpoint.post("testWebhook", "/v1/integrations/test-webhook", {
      payload: TestWebhookInput,
      success: Data(TestWebhookResult),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.get("get", "/v1/integrations/:integration", {
      params: Params,
      success: Data(Integration),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.patch("update", "/v1/integrations/:integration", {
      params: Params,
      payload: UpdateIntegration,
      success: Data(IntegrationWithSecret),
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.delete("delete", "/v1/integrations/:integration", {
      params: Params,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.get("logs", "/v1/integrations/:integration/logs", {
      params: Params,
      query: { limit: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 200 }))) },
      success: Data(Schema.Array(LogEntry)),
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.get("providers", "/v1/integration-providers", {
      query: { published: Schema.optional(Schema.Literals(["true", "false", "1", "0"])) },
      success: Data(Schema.Array(Provider)),
      error: [...AuthErrors, Unprocessable]
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Webhook integrations",
    description: "Outbound webhooks (Standard Webhooks signatures) for the events of the system-events catalog. Secrets are " +
      "write-only: `credential.secrets` says which are set. Deliveries are retried with backoff (5 s, 30 s, 2 min, 10 min, " +
      "30 min, 1 h, 3 h, 6 h, 12 h, ±20%) up to `maxAttempts`, logged under `/logs` for 30 days."
  }))
{}

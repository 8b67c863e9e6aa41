import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { data } from "../platform/Envelope.ts"
import { Integrations } from "./Integrations.ts"

export const IntegrationsHttp = HttpApiBuilder.group(Api, "integrations", Effect.fn(function*(handlers) {
  const integrations = yield* Integrations
  return handlers
    .handle("list", ({ query }) => data(integrations.list(query)))
    .handle("create", ({ payload }) => data(integrations.create(payload)))
    .handle("summary", () => data(integrations.summary))
    .handle("testWebhook", ({ payload }) => data(integrations.testWebhook(payload)))
    .handle("get", ({ params }) => data(integrations.get(params.integration)))
    .handle("update", ({ params, payload }) => data(integrations.update(params.integration, payload)))
    .handle("delete", ({ params }) => Effect.as(integrations.delete(params.integration), { data: { message: "Integration deleted." } }))
    .handle("logs", ({ params, query }) => data(integrations.logs(params.integration, query.limit ?? 50)))
    .handle("providers", ({ query }) =>
      data(integrations.providers(query.published === undefined ? undefined : query.published === "true" || query.published === "1")))
})).pipe(Layer.provide(Integrations.layer))

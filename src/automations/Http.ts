import { Effect, Layer, Stream } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { data } from "../platform/Envelope.ts"
import { invalidField } from "../platform/Errors.ts"
import { Automations } from "./Automations.ts"

const notAForm = () => Effect.fail(invalidField("file", "The request must be multipart/form-data with a file field."))

export const AutomationsHttp = HttpApiBuilder.group(Api, "automations", Effect.fn(function*(handlers) {
  const automations = yield* Automations
  return handlers
    .handle("bootstrap", () => data(automations.bootstrap))
    .handle("list", () => data(automations.list))
    .handle("voice", ({ payload }) => Stream.isStream(payload) ? automations.voice(payload) : notAForm())
    .handle("get", ({ params }) => data(automations.get(params.automation)))
    .handle("create", ({ payload }) => data(automations.create(payload)))
    .handle("update", ({ params, payload }) => data(automations.update(params.automation, payload)))
    .handle("builder", ({ params, payload }) => data(automations.builder(params.automation, payload)))
    .handle("delete", ({ params }) => Effect.as(automations.delete(params.automation), { data: { message: "Automation deleted." } }))
    .handle("runs", ({ params, query }) => data(automations.runs(params.automation, query.page ?? 1, query.perPage ?? 20)))
    .handle("run", ({ params }) => data(automations.run(params.automation, params.run)))
})).pipe(Layer.provide(Automations.layer))

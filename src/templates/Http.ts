import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { data } from "../platform/Envelope.ts"
import { TemplateMessages } from "./SendTemplate.ts"
import { Moderation } from "./Moderation.ts"
import { Templates } from "./Templates.ts"

export const TemplatesHttp = HttpApiBuilder.group(Api, "templates", Effect.fn(function*(handlers) {
  const templates = yield* Templates
  const moderation = yield* Moderation
  const messages = yield* TemplateMessages
  return handlers
    .handle("list", ({ query }) => data(templates.list(query)))
    .handle("channelTypes", () => data(templates.channelTypes))
    .handle("sync", () => data(moderation.sync))
    .handle("create", ({ payload }) => data(templates.create(payload)))
    .handle("get", ({ params }) => data(templates.get(params.template)))
    .handle("update", ({ params, payload }) => data(templates.update(params.template, payload)))
    .handle("updateByPost", ({ params, payload }) => data(templates.update(params.template, payload)))
    .handle("delete", ({ params }) => Effect.as(templates.remove(params.template), { data: { message: "Template deleted." } }))
    .handle("channels", ({ params }) => data(templates.channels(params.template)))
    .handle("assignChannels", ({ params, payload }) => data(templates.assignChannels(params.template, payload)))
    .handle("events", ({ params }) => data(templates.events(params.template)))
    .handle("addLanguage", ({ params, payload }) => data(templates.addLanguage(params.template, payload)))
    .handle("deleteLanguage", ({ params }) => data(templates.deleteLanguage(params.template, params.language)))
    .handle("submit", ({ params }) => data(moderation.submit(params.template)))
    .handle("publish", ({ params }) => data(templates.publish(params.template)))
    .handle("archive", ({ params }) => data(templates.archive(params.template)))
    .handle("unarchive", ({ params }) => data(templates.unarchive(params.template)))
    .handle("sandboxStatus", ({ params, payload }) => data(moderation.sandboxStatus(params.channel, payload)))
    .handle("send", ({ payload, headers }) => data(messages.send(payload, headers["idempotency-key"])))
})).pipe(Layer.provide([Templates.layer, Moderation.layer, TemplateMessages.layer]))

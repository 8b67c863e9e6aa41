import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Messages } from "./Messages.ts"

const data = <A>(value: A) => ({ data: value })

export const MessagesHttp = HttpApiBuilder.group(Api, "messages", Effect.fn(function*(handlers) {
  const messages = yield* Messages
  return handlers
    .handle("list", ({ query }) => Effect.map(messages.list(query), data))
    .handle("send", ({ payload, headers }) => Effect.map(messages.send(payload, headers["idempotency-key"]), data))
    .handle("create", ({ payload }) => Effect.map(messages.create(payload), data))
    .handle("get", ({ params }) => Effect.map(messages.get(params.id), data))
    .handle("update", ({ params, payload }) => Effect.map(messages.update(params.id, payload), data))
    .handle("remove", ({ params, payload }) => Effect.map(messages.remove(params.id, payload), data))
    .handle("around", ({ params, query }) => Effect.map(messages.around(params.id, query.limit ?? 10), data))
    .handle("statuses", ({ params }) => Effect.map(messages.statuses(params.id), data))
    .handle("addStatus", ({ params, payload }) => Effect.map(messages.addStatus(params.id, payload), data))
    .handle("reactions", ({ params }) => Effect.map(messages.reactions(params.id), data))
    .handle("react", ({ params, payload }) => Effect.map(messages.react(params.id, payload), data))
    .handle("unreact", ({ params }) =>
      Effect.map(messages.unreact(params.id), (removed) =>
        data({ message: removed ? "Reaction removed." : "There was no reaction to remove.", removed })))
    .handle("like", ({ params }) => Effect.as(messages.like(params.id), { message: "Comment liked." }))
    .handle("forward", ({ params, payload }) => Effect.map(messages.forward(params.id, payload), data))
    .handle("attachments", ({ params }) => Effect.map(messages.attachments(params.id), data))
    .handle("attach", ({ params, payload }) => Effect.map(messages.attach(params.id, payload), data))
    .handle("fetchAttachment", ({ params }) => Effect.map(messages.fetchAttachment(params.id, params.attachment), data))
}))

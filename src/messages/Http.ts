import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { data } from "../platform/Envelope.ts"
import { Messages } from "./Messages.ts"
import { Outbound } from "./Outbound.ts"
import { Reactions } from "./Reactions.ts"
import { Settlement } from "./Settlement.ts"
import { Media } from "../media/Media.ts"

export const MessagesHttp = HttpApiBuilder.group(Api, "messages", Effect.fn(function*(handlers) {
  const messages = yield* Messages
  const outbound = yield* Outbound
  const reactions = yield* Reactions
  const settlement = yield* Settlement
  return handlers
    .handle("list", ({ query }) => data(messages.list(query)))
    .handle("send", ({ payload, headers }) => data(outbound.send(payload, headers["idempotency-key"])))
    .handle("create", ({ payload }) => data(outbound.create(payload)))
    .handle("settleKey", ({ params, payload }) => data(settlement.settleKey(params.key, payload)))
    .handle("get", ({ params }) => data(messages.get(params.id)))
    .handle("update", ({ params, payload }) => data(messages.update(params.id, payload)))
    .handle("remove", ({ params, payload }) => data(messages.remove(params.id, payload)))
    .handle("around", ({ params, query }) => data(messages.around(params.id, query.limit ?? 10)))
    .handle("statuses", ({ params }) => data(messages.statuses(params.id)))
    .handle("addStatus", ({ params, payload }) => data(messages.addStatus(params.id, payload)))
    .handle("reactions", ({ params }) => data(reactions.list(params.id)))
    .handle("react", ({ params, payload }) => data(reactions.react(params.id, payload)))
    .handle("unreact", ({ params }) =>
      data(Effect.map(reactions.unreact(params.id), (removed) => ({
        message: removed ? "Reaction removed." : "There was no reaction to remove.",
        removed
      }))))
    .handle("like", ({ params }) => Effect.as(reactions.like(params.id), { message: "Comment liked." }))
    .handle("forward", ({ params, payload }) => data(outbound.forward(params.id, payload)))
    .handle("attachments", ({ params }) => data(messages.attachments(params.id)))
    .handle("attach", ({ params, payload }) => data(messages.attach(params.id, payload)))
    .handle("fetchAttachment", ({ params }) => data(messages.fetchAttachment(params.id, params.attachment)))
})).pipe(Layer.provide([Messages.layer, Outbound.layer, Reactions.layer, Settlement.layer]), Layer.provide(Media.layer))

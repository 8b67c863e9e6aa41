import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { ApiTokens } from "./ApiTokens.ts"
import { data } from "../platform/Envelope.ts"

const revoked = { data: { message: "Token revoked." } }

export const ApiTokensHttp = HttpApiBuilder.group(Api, "apiTokens", Effect.fn(function*(handlers) {
  const tokens = yield* ApiTokens
  return handlers
    .handle("list", () => data(tokens.list))
    .handle("create", ({ payload }) => data(tokens.create(payload)))
    .handle("get", ({ params }) => data(tokens.get(params.id)))
    .handle("update", ({ params, payload }) => data(tokens.update(params.id, payload)))
    .handle("revoke", ({ params }) => Effect.as(tokens.revoke(params.id), revoked))
})).pipe(Layer.provide(ApiTokens.layer))

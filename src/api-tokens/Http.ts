import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { ApiTokens } from "./ApiTokens.ts"

const revoked = { data: { message: "Token revoked." } }

export const ApiTokensHttp = HttpApiBuilder.group(Api, "apiTokens", Effect.fn(function*(handlers) {
  const tokens = yield* ApiTokens
  return handlers
    .handle("list", () => Effect.map(tokens.list, (data) => ({ data })))
    .handle("create", ({ payload }) => Effect.map(tokens.create(payload), (data) => ({ data })))
    .handle("get", ({ params }) => Effect.map(tokens.get(params.id), (data) => ({ data })))
    .handle("update", ({ params, payload }) => Effect.map(tokens.update(params.id, payload), (data) => ({ data })))
    .handle("revoke", ({ params }) => Effect.as(tokens.revoke(params.id), revoked))
}))

import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Teams } from "./Teams.ts"
import { data } from "../platform/Envelope.ts"

export const TeamsHttp = HttpApiBuilder.group(Api, "teams", Effect.fn(function*(handlers) {
  const teams = yield* Teams
  return handlers
    .handle("list", () => data(teams.list))
    .handle("create", ({ payload }) => Effect.map(teams.create(payload), (team) => ({ data: { message: "Team created.", team } })))
    .handle("get", ({ params }) => data(teams.get(params.team)))
    .handle("update", ({ params, payload }) => data(teams.update(params.team, payload)))
    .handle("delete", ({ params }) => Effect.as(teams.delete(params.team), { data: { message: "Team deleted." } }))
})).pipe(Layer.provide(Teams.layer))

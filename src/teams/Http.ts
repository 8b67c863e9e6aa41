import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Teams } from "./Teams.ts"

export const TeamsHttp = HttpApiBuilder.group(Api, "teams", Effect.fn(function*(handlers) {
  const teams = yield* Teams
  return handlers
    .handle("list", () => Effect.map(teams.list, (data) => ({ data })))
    .handle("create", ({ payload }) => Effect.map(teams.create(payload), (team) => ({ data: { message: "Team created.", team } })))
    .handle("get", ({ params }) => Effect.map(teams.get(params.team), (data) => ({ data })))
    .handle("update", ({ params, payload }) => Effect.map(teams.update(params.team, payload), (data) => ({ data })))
    .handle("delete", ({ params }) => Effect.as(teams.delete(params.team), { data: { message: "Team deleted." } }))
}))

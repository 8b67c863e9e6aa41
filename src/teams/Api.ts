import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { AuthErrors, NotFound, Unprocessable } from "../platform/Errors.ts"
import { CreateTeam, Team, TeamId, UpdateTeam } from "./Domain.ts"
import { Data } from "../platform/Envelope.ts"

const TeamParams = { team: TeamId }

export class TeamsApi extends HttpApiGroup.make("teams")
  .add(
    HttpApiEndpoint.get("list", "/v1/teams", {
      success: Data(Schema.Array(Team)),
      error: AuthErrors
    }),
    HttpApiEndpoint.post("create", "/v1/teams", {
      payload: CreateTeam,
      success: Data(Schema.Struct({ message: Schema.String, team: Team })).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.get("get", "/v1/teams/:team", {
      params: TeamParams,
      success: Data(Team),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.patch("update", "/v1/teams/:team", {
      params: TeamParams,
      payload: UpdateTeam,
      success: Data(Team),
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.delete("delete", "/v1/teams/:team", {
      params: TeamParams,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, NotFound]
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Teams",
    description: "Teams group members and decide which channels an agent sees: `channel_access_mode` " +
      "`custom` grants exactly `channel_ids`, `all` grants every channel of the company."
  }))
{}

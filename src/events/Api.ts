import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { AuthErrors } from "../platform/Errors.ts"
import { PageInfo } from "../platform/Pagination.ts"
import { CatalogEntry, EventEnvelope } from "./Domain.ts"
import { Data } from "../platform/Envelope.ts"

export class EventsApi extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("replay", "/v1/events", {
      query: {
        after: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
        limit: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 500 })))
      },
      success: Schema.Struct({
        data: Schema.Struct({
          items: Schema.Array(EventEnvelope),
          pagination: PageInfo,
          next_after: Schema.Int
        })
      }),
      error: AuthErrors
    }),
    HttpApiEndpoint.get("catalog", "/v1/system-events", {
      query: { type: Schema.optional(Schema.String), group: Schema.optional(Schema.String) },
      success: Data(Schema.Array(CatalogEntry)),
      error: AuthErrors
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Events", description: "Replay of a company's events and the event catalog" }))
{}

import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, NotFound, Unprocessable } from "../platform/Errors.ts"
import { Paged } from "../platform/Pagination.ts"
import { CreateSegment, EstimateInput, ListQuery, MembersInput, Segment, SegmentId, UpdateSegment } from "./Domain.ts"

const Params = { segment: SegmentId }
const Update = {
  params: Params,
  payload: UpdateSegment,
  success: Data(Segment),
  error: [...AuthErrors, NotFound, Unprocessable]
} as const
const Members = {
  params: Params,
  payload: MembersInput,
  success: Data(Segment),
  error: [...AuthErrors, NotFound, Unprocessable]
} as const

export class SegmentsApi extends HttpApiGroup.make("segments")
  .add(
    HttpApiEndpoint.get("list", "/v1/segments", {
      query: ListQuery,
      success: Data(Paged(Segment)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Newest first; `perPage` 1-100, default 50; `search` matches name and description (case-insensitive)."
    })),
    HttpApiEndpoint.post("create", "/v1/segments", {
      payload: CreateSegment,
      success: Data(Segment).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "`type` `dynamic` (default) selects by `conditions`; `static` lists its members in `contact_ids` and has " +
        "no conditions. `slug` comes from the name (unique per company: `-2`, `-3`, … on collision)."
    })),
    HttpApiEndpoint.post("estimate", "/v1/segments/estimate", {
      payload: EstimateInput,
      success: Data(Schema.Struct({ estimated_count: Schema.Int })),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({ description: "Counts the live contacts the conditions select; nothing is saved." })),
    HttpApiEndpoint.patch("update", "/v1/segments/:segment", Update),
    HttpApiEndpoint.post("updateByPost", "/v1/segments/:segment", Update).annotateMerge(OpenApi.annotations({
      description: "Alias of PATCH for clients without PATCH."
    })),
    HttpApiEndpoint.delete("delete", "/v1/segments/:segment", {
      params: Params,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.post("addMembers", "/v1/segments/:segment/members", Members).annotateMerge(OpenApi.annotations({
      description: "Static segments: adds live contacts of the company (422 `contact_ids.<i>` otherwise); " +
        "a dynamic segment answers 422 `segment_not_static`."
    })),
    HttpApiEndpoint.delete("removeMembers", "/v1/segments/:segment/members", Members).annotateMerge(OpenApi.annotations({
      description: "Static segments: removes these contacts; ids that are not members are ignored."
    }))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Segments",
    description: "Reusable audiences. Conditions with the same `group` must all hold; groups are joined by `group_logic`. " +
      "Deleted contacts are never members. See the README for every condition type and operator."
  }))
{}

import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, NotFound, Unprocessable } from "../platform/Errors.ts"
import { Tag, TagId, TagInput } from "./Domain.ts"

const Params = { tag: TagId }

export class TagsApi extends HttpApiGroup.make("tags")
  .add(
    HttpApiEndpoint.get("list", "/v1/tags", {
      success: Data(Schema.Array(Tag)),
      error: AuthErrors
    }),
    HttpApiEndpoint.post("create", "/v1/tags", {
      payload: TagInput,
      success: Data(Tag).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.get("get", "/v1/tags/:tag", {
      params: Params,
      success: Data(Tag),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.patch("update", "/v1/tags/:tag", {
      params: Params,
      payload: TagInput,
      success: Data(Tag),
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.delete("delete", "/v1/tags/:tag", {
      params: Params,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, NotFound]
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Tags",
    description: "Not in the spec: the company's tag catalog, so that contacts can be tagged by id. Names are unique per " +
      "company ignoring case (422 on `name`); deleting a tag removes it from every contact."
  }))
{}

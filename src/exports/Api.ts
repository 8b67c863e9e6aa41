import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication, PlanGate, requiresFeature } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, NotFound, Unprocessable } from "../platform/Errors.ts"
import { SignedRouteErrors, signedQuery } from "../platform/files/SignedQuery.ts"
import { Paged, pageQuery } from "../platform/Pagination.ts"
import { Export, ExportId, ExportInput } from "./Domain.ts"

const Params = { export: ExportId }
const FileBytes = Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "application/octet-stream" }))

export class ExportsApi extends HttpApiGroup.make("exports")
  .add(
    HttpApiEndpoint.get("list", "/v1/exports", {
      query: pageQuery({ min: 5, max: 100 }),
      success: Data(Paged(Export)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.post("create", "/v1/exports", {
      payload: ExportInput,
      success: Data(Schema.Struct({ message: Schema.String, export: Export })).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.get("get", "/v1/exports/:export", {
      params: Params,
      success: Data(Schema.Struct({ export: Export })),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.get("download", "/v1/exports/:export/download", {
      params: Params,
      success: FileBytes,
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.delete("delete", "/v1/exports/:export", {
      params: Params,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, NotFound]
    })
  )
  .middleware(PlanGate)
  .middleware(Authentication)
  .annotateEndpointsMerge(requiresFeature("exports"))
  .annotateMerge(OpenApi.annotations({
    title: "Exports",
    description: "Exports of contacts, messages or segments to CSV, XLSX or JSON, written by a background job. " +
      "Business plan feature `exports`; 20 exports per company per UTC day, 5 of them of type messages."
  }))
{}

/** Signed public route: what `download_url` points at; the signature in the query is the authorization. */
export class ExportFilesApi extends HttpApiGroup.make("exportFiles")
  .add(
    HttpApiEndpoint.get("file", "/v1/exports/:export/file", {
      params: Params,
      query: signedQuery,
      success: FileBytes,
      error: SignedRouteErrors
    })
  )
  .annotateMerge(OpenApi.annotations({
    title: "Export files",
    description: "The file of a completed export, through the signed `download_url` (no Authorization header), valid until `expires_at`."
  }))
{}

import { CompanyId } from "../auth/Domain.ts"
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity, OpenApi } from "effect/http-api"
import { NotFound, ServiceUnavailable, Unauthenticated, Unprocessable } from "../platform/Errors.ts"
import { AddUser, CompanyView, CreateCompany, UpdateCompany } from "./Domain.ts"
import { Data } from "../platform/Envelope.ts"
import { Paged, pageQuery } from "../platform/Pagination.ts"

/** `Authorization: Bearer <PLATFORM_API_KEY>`: the operator of the platform, not a tenant. */
export class PlatformAuth extends HttpApiMiddleware.Service<PlatformAuth>()("crm/platform-admin/PlatformAuth", {
  security: { bearer: HttpApiSecurity.http({ scheme: "bearer" }) },
  error: [Unauthenticated, ServiceUnavailable]
}) {}

const CompanyParams = { id: CompanyId }

export class PlatformApi extends HttpApiGroup.make("platform")
  .add(
    HttpApiEndpoint.post("createCompany", "/companies", {
      payload: CreateCompany,
      success: Schema.Struct({
        data: Schema.Struct({
          company: CompanyView,
          admin: Schema.Struct({ id: Schema.Int, email: Schema.String }),
          token: Schema.String
        })
      }).pipe(HttpApiSchema.status(201)),
      error: Unprocessable
    }),
    HttpApiEndpoint.get("listCompanies", "/companies", {
      query: pageQuery({ min: 1, max: 100 }),
      success: Data(Paged(CompanyView)),
      error: Unprocessable
    }).annotateMerge(OpenApi.annotations({ summary: "List companies", description: "Every company, oldest first." })),
    HttpApiEndpoint.get("getCompany", "/companies/:id", {
      params: CompanyParams,
      success: Data(CompanyView),
      error: NotFound
    }),
    HttpApiEndpoint.patch("updateCompany", "/companies/:id", {
      params: CompanyParams,
      payload: UpdateCompany,
      success: Data(CompanyView),
      error: [NotFound, Unprocessable]
    }),
    HttpApiEndpoint.post("addUser", "/companies/:id/users", {
      params: CompanyParams,
      payload: AddUser,
      success: Data(Schema.Struct({ user: Schema.Struct({ id: Schema.Int, email: Schema.String }) }))
        .pipe(HttpApiSchema.status(201)),
      error: [NotFound, Unprocessable]
    }),
    HttpApiEndpoint.post("rotateKey", "/key/rotate", {
      success: Data(Schema.Struct({ key: Schema.String }))
    }).annotateMerge(OpenApi.annotations({
      summary: "Rotate the platform API key",
      description: "A new key, shown once; the key used for this call stops working at once on every runner."
    }))
  )
  .middleware(PlatformAuth)
  .prefix("/platform/v1")
  .annotateMerge(OpenApi.annotations({
    title: "Platform",
    description: "Tenant provisioning for the platform operator (PLATFORM_API_KEY); not part of the tenant API"
  }))
{}

import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { AuthErrors, NotFound, Unprocessable } from "../platform/Errors.ts"
import { ChangeRole, Member, MemberId, User } from "./Domain.ts"
import { Data } from "../platform/Envelope.ts"

const MemberParams = { memberId: MemberId }

export class MembersApi extends HttpApiGroup.make("members")
  .add(
    HttpApiEndpoint.get("list", "/v1/companies/current/members", {
      success: Data(Schema.Array(Member)),
      error: AuthErrors
    }),
    HttpApiEndpoint.post("changeRole", "/v1/companies/current/members/:memberId/role", {
      params: MemberParams,
      payload: ChangeRole,
      success: Data(Schema.Struct({ message: Schema.String, member: Member })),
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.post("revoke", "/v1/companies/current/members/:memberId/revoke", {
      params: MemberParams,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.get("users", "/v1/users", {
      success: Data(Schema.Array(User)),
      error: AuthErrors
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Members and users",
    description: "People of the active company (service accounts never appear). Role change and revoke are " +
      "for admins; the last admin can be neither demoted nor revoked."
  }))
{}

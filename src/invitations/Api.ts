import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { AuthErrors, NotFound, Unprocessable } from "../platform/Errors.ts"
import { ChangeInvitationRole, CreateInvitation, Invitation, InvitationAnswer, InvitationId } from "./Domain.ts"
import { Data } from "../platform/Envelope.ts"

const ByGuid = { guid: Schema.String }
const ById = { invitationId: InvitationId }

export class InvitationsApi extends HttpApiGroup.make("invitations")
  .add(
    HttpApiEndpoint.get("list", "/v1/invitations", {
      success: Data(Schema.Array(Invitation)),
      error: AuthErrors
    }),
    HttpApiEndpoint.post("create", "/v1/invitations", {
      payload: CreateInvitation,
      success: InvitationAnswer.pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.post("accept", "/v1/invitations/:guid/accept", {
      params: ByGuid,
      success: InvitationAnswer,
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.post("decline", "/v1/invitations/:guid/decline", {
      params: ByGuid,
      success: InvitationAnswer,
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.post("changeRole", "/v1/invitations/:invitationId/role", {
      params: ById,
      payload: ChangeInvitationRole,
      success: InvitationAnswer,
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.post("revoke", "/v1/invitations/:invitationId/revoke", {
      params: ById,
      success: InvitationAnswer,
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.delete("delete", "/v1/invitations/:invitationId", {
      params: ById,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, NotFound]
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Invitations",
    description: "Invitations to join the active company, valid 7 days. Only a `pending` invitation can be " +
      "accepted, declined, re-roled or revoked; `expired`, `accepted`, `declined` and `revoked` answer 422. " +
      "Accept and decline are for the signed-in account whose e-mail the invitation was sent to (403 otherwise) " +
      "and work without an active company."
  }))
{}

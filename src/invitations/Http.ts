import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Invitations } from "./Invitations.ts"
import { data } from "../platform/Envelope.ts"

export const InvitationsHttp = HttpApiBuilder.group(Api, "invitations", Effect.fn(function*(handlers) {
  const invitations = yield* Invitations
  return handlers
    .handle("list", () => data(invitations.list))
    .handle("create", ({ payload }) =>
      Effect.map(invitations.create(payload), (invitation) => ({ data: { message: "Invitation sent.", invitation } })))
    .handle("accept", ({ params }) =>
      Effect.map(invitations.accept(params.guid), (invitation) => ({ data: { message: "Invitation accepted.", invitation } })))
    .handle("decline", ({ params }) =>
      Effect.map(invitations.decline(params.guid), (invitation) => ({ data: { message: "Invitation declined.", invitation } })))
    .handle("changeRole", ({ params, payload }) =>
      Effect.map(invitations.changeRole(params.invitationId, payload.role), (invitation) => ({
        data: { message: "Invitation role updated.", invitation }
      })))
    .handle("revoke", ({ params }) =>
      Effect.map(invitations.revoke(params.invitationId), (invitation) => ({ data: { message: "Invitation revoked.", invitation } })))
    .handle("delete", ({ params }) => Effect.as(invitations.delete(params.invitationId), { data: { message: "Invitation deleted." } }))
})).pipe(Layer.provide(Invitations.layer))

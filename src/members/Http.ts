import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Members } from "./Members.ts"
import { data } from "../platform/Envelope.ts"

export const MembersHttp = HttpApiBuilder.group(Api, "members", Effect.fn(function*(handlers) {
  const members = yield* Members
  return handlers
    .handle("list", () => data(members.list))
    .handle("changeRole", ({ params, payload }) =>
      Effect.map(members.changeRole(params.memberId, payload.role), (member) => ({
        data: { message: "Role updated.", member }
      })))
    .handle("revoke", ({ params }) => Effect.as(members.revoke(params.memberId), { data: { message: "Membership revoked." } }))
    .handle("users", () => data(members.users))
})).pipe(Layer.provide(Members.layer))

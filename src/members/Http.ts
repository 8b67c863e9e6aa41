import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Members } from "./Members.ts"

export const MembersHttp = HttpApiBuilder.group(Api, "members", Effect.fn(function*(handlers) {
  const members = yield* Members
  return handlers
    .handle("list", () => Effect.map(members.list, (data) => ({ data })))
    .handle("changeRole", ({ params, payload }) =>
      Effect.map(members.changeRole(params.memberId, payload.role), (member) => ({
        data: { message: "Role updated.", member }
      })))
    .handle("revoke", ({ params }) => Effect.as(members.revoke(params.memberId), { data: { message: "Membership revoked." } }))
    .handle("users", () => Effect.map(members.users, (data) => ({ data })))
}))

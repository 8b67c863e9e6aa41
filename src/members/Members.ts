import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { CurrentActor, requirePermission } from "../auth/Domain.ts"
import type { Role } from "../auth/Permissions.ts"
import { Events } from "../events/Events.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import { type Forbidden, type NotFound, notFound, Unprocessable } from "../platform/Errors.ts"
import type { Member, User } from "./Domain.ts"
import { Pbx } from "../telephony/Pbx.ts"
import { releaseOperator } from "../telephony/Telephony.ts"
import { userPhotoUrl } from "../users/Links.ts"
import { MembersRepo } from "./Repo.ts"
import { CredentialCache } from "../auth/Credentials.ts"

const memberNotFound = () => notFound("Member not found.")

const lastAdmin = (field: string, message: string) =>
  new Unprocessable({ message, errors: { [field]: [message] }, error_code: "last_admin" })

export class Members extends Context.Service<Members, {
  readonly list: Effect.Effect<ReadonlyArray<Member>, Forbidden, CurrentActor>
  readonly users: Effect.Effect<ReadonlyArray<User>, Forbidden, CurrentActor>
  changeRole(userId: number, role: Role): Effect.Effect<Member, Forbidden | NotFound | Unprocessable, CurrentActor>
  revoke(userId: number): Effect.Effect<void, Forbidden | NotFound | Unprocessable, CurrentActor>
}>()("crm/members/Members") {
  static readonly layerNoDeps = Layer.effect(
    Members,
    Effect.gen(function*() {
      const repo = yield* MembersRepo
      const credentials = yield* CredentialCache
      const events = yield* Events
      const pbx = yield* Pbx
      const sql = yield* SqlClient.SqlClient
      const signed = yield* SignedUrls

      const withPhoto = (companyId: number) => <A extends { readonly id: number; readonly photo_version: number | null }>(
        { photo_version, ...person }: A
      ) => ({ ...person, photo_url: userPhotoUrl(signed, companyId, person.id, photo_version) })

      const list = Effect.gen(function*() {
        const company = yield* requirePermission("member.view")
        return (yield* repo.list(company.id)).map(withPhoto(company.id))
      }).pipe(Effect.withSpan("Members.list"))

      const users = Effect.gen(function*() {
        const company = yield* requirePermission("user.view")
        return (yield* repo.users(company.id)).map(withPhoto(company.id))
      }).pipe(Effect.withSpan("Members.users"))

      // Service accounts are admins too, but they vanish with their token: only a
      // person counts towards keeping the company administrable.
      const changeRole = Effect.fn("Members.changeRole")(function*(userId: number, role: Role) {
        const company = yield* requirePermission("member.update")
        return yield* Effect.gen(function*() {
          yield* repo.lockCompany(company.id)
          const member = yield* repo.find(company.id, userId)
          if (Option.isNone(member)) return yield* memberNotFound()
          if (member.value.role === role) return withPhoto(company.id)(member.value)
          if (member.value.role === "admin" && (yield* repo.countAdmins(company.id)) <= 1) {
            return yield* lastAdmin("role", "The last admin of the company cannot be demoted.")
          }
          yield* repo.setRole(company.id, userId, role)
          yield* credentials.forget([{ userId }])
          yield* events.emit(company.id, "member.updated", { id: userId, role, previous_role: member.value.role })
          return withPhoto(company.id)({ ...member.value, role })
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
      })

      const revoke = Effect.fn("Members.revoke")(function*(userId: number) {
        const company = yield* requirePermission("member.delete")
        const actor = yield* CurrentActor
        yield* Effect.gen(function*() {
          yield* repo.lockCompany(company.id)
          const member = yield* repo.find(company.id, userId)
          if (Option.isNone(member)) return yield* memberNotFound()
          if (userId === actor.userId) {
            return yield* new Unprocessable({
              message: "You cannot revoke your own membership.",
              error_code: "cannot_revoke_self"
            })
          }
          if (member.value.role === "admin" && (yield* repo.countAdmins(company.id)) <= 1) {
            return yield* lastAdmin("member", "The last admin of the company cannot be revoked.")
          }
          yield* repo.remove(company.id, userId)
          // Its subscriptions end through the member.removed event, on every runner.
          yield* credentials.forget([{ userId }])
          yield* events.emit(company.id, "member.removed", { id: userId })
          // The operator row goes with the membership; the PBX must forget the SIP logins too.
          yield* sql.afterCommit(Effect.provideService(releaseOperator(company.id, userId), Pbx, pbx))
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
      })

      return Members.of({ list, users, changeRole, revoke })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(MembersRepo.layer))
}

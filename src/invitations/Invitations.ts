import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { CurrentActor, requirePermission } from "../auth/Domain.ts"
import type { Role } from "../auth/Permissions.ts"
import { Events } from "../events/Events.ts"
import { AppConfig } from "../platform/Config.ts"
import {
  type Forbidden,
  forbidden,
  invalidField,
  type NotFound,
  notFound,
  ruleViolation,
  type Unprocessable
} from "../platform/Errors.ts"
import { Mailer } from "../platform/Mail.ts"
import type { CreateInvitation, Invitation, InvitationStatus } from "./Domain.ts"
import { type InvitationRow, InvitationsRepo } from "./Repo.ts"
import { CredentialCache } from "../auth/Credentials.ts"

const lifetimeMs = 7 * 86_400_000
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

const invitationNotFound = () => notFound("Invitation not found.")

const notPending: Record<Exclude<InvitationStatus, "pending">, string> = {
  expired: "This invitation has expired.",
  accepted: "This invitation has already been accepted.",
  declined: "This invitation has been declined.",
  revoked: "This invitation has been revoked."
}

type Failure = Forbidden | NotFound | Unprocessable

export class Invitations extends Context.Service<Invitations, {
  readonly list: Effect.Effect<ReadonlyArray<Invitation>, Forbidden, CurrentActor>
  create(input: CreateInvitation): Effect.Effect<Invitation, Forbidden | Unprocessable, CurrentActor>
  accept(guid: string): Effect.Effect<Invitation, Failure, CurrentActor>
  decline(guid: string): Effect.Effect<Invitation, Failure, CurrentActor>
  changeRole(id: number, role: Role): Effect.Effect<Invitation, Failure, CurrentActor>
  revoke(id: number): Effect.Effect<Invitation, Failure, CurrentActor>
  delete(id: number): Effect.Effect<void, Forbidden | NotFound, CurrentActor>
}>()("crm/invitations/Invitations") {
  static readonly layerNoDeps = Layer.effect(
    Invitations,
    Effect.gen(function*() {
      const repo = yield* InvitationsRepo
      const credentials = yield* CredentialCache
      const events = yield* Events
      const mailer = yield* Mailer
      const sql = yield* SqlClient.SqlClient
      const config = yield* AppConfig
      const appUrl = config.appUrl.replace(/\/+$/, "")

      const inviteUrl = (guid: string) => `${appUrl}/invitation/${guid}`

      const statusOf = (row: InvitationRow, now: number): InvitationStatus =>
        row.status === "pending" && row.expires_at.getTime() <= now ? "expired" : row.status

      const view = (row: InvitationRow, now: number): Invitation => ({
        id: row.id,
        company_id: row.company_id,
        guid: row.guid,
        invite_url: inviteUrl(row.guid),
        email: row.email,
        role: row.role,
        status: statusOf(row, now),
        expires_at: row.expires_at.toISOString(),
        created_at: row.created_at.toISOString()
      })

      const requirePending = Effect.fnUntraced(function*(row: InvitationRow, now: number) {
        const status = statusOf(row, now)
        if (status !== "pending") return yield* ruleViolation(`invitation_${status}`, notPending[status])
      })

      // Only someone who may change members' roles may hand out the admin role.
      const mayGrant = (company: { readonly permissions: ReadonlySet<string> }, role: Role) =>
        role === "admin" && !company.permissions.has("member.update")
          ? Effect.fail(forbidden("Only an admin can invite an admin."))
          : Effect.void

      const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        effect.pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))

      const list = Effect.gen(function*() {
        const company = yield* requirePermission("invitation.view")
        const now = yield* Clock.currentTimeMillis
        return (yield* repo.listPending(company.id)).map((row) => view(row, now))
      }).pipe(Effect.withSpan("Invitations.list"))

      const create = Effect.fn("Invitations.create")(function*(input: CreateInvitation) {
        const company = yield* requirePermission("invitation.create")
        yield* mayGrant(company, input.role)
        const actor = yield* CurrentActor
        const email = input.email.trim()
        return yield* transaction(Effect.gen(function*() {
          yield* repo.lockCompany(company.id)
          if (yield* repo.isMemberByEmail(company.id, email)) {
            return yield* invalidField("email", "This person is already a member of the company.")
          }
          // A new invitation to the same address replaces the pending one (a resend).
          const replaced = yield* repo.revokePending(company.id, email)
          const now = yield* Clock.currentTimeMillis
          const row = yield* repo.insert(company.id, {
            guid: randomUUID(),
            email,
            role: input.role,
            invited_by: actor.userId,
            expires_at: new Date(now + lifetimeMs)
          })
          const invitation = view(row, now)
          const companyName = yield* repo.companyName(company.id)
          yield* mailer.send({
            to: email,
            subject: `You are invited to join ${companyName}`,
            body: [
              `You have been invited to join ${companyName} as ${invitation.role}.`,
              "",
              `Accept the invitation: ${invitation.invite_url}`,
              "",
              `The invitation expires at ${invitation.expires_at}.`
            ].join("\n")
          })
          for (const id of replaced) yield* events.emit(company.id, "invitation.updated", { id, status: "revoked" })
          yield* events.emit(company.id, "invitation.created", { id: row.id, email, role: row.role })
          return invitation
        }))
      })

      const answer = (status: "accepted" | "declined") =>
        Effect.fnUntraced(function*(guid: string) {
          const actor = yield* CurrentActor
          if (!uuidPattern.test(guid)) return yield* invitationNotFound()
          return yield* transaction(Effect.gen(function*() {
            const found = yield* repo.findByGuid(guid)
            if (Option.isNone(found)) return yield* invitationNotFound()
            const row = found.value
            if (actor.email === null || actor.email.toLowerCase() !== row.email.toLowerCase()) {
              return yield* forbidden("This invitation was sent to another e-mail address.")
            }
            const now = yield* Clock.currentTimeMillis
            yield* requirePending(row, now)
            if (status === "accepted") {
              if (yield* repo.isMember(row.company_id, actor.userId)) {
                return yield* ruleViolation("already_member", "You are already a member of this company.")
              }
              yield* repo.join(row.company_id, actor.userId, row.role)
              yield* credentials.forget([{ userId: actor.userId }])
              yield* events.emit(row.company_id, "member.added", { id: actor.userId, role: row.role })
            }
            const updated = yield* repo.answer(row.company_id, row.id, status, actor.userId)
            yield* events.emit(row.company_id, "invitation.updated", { id: row.id, status })
            return view(updated, now)
          }))
        })

      const accept = Effect.fn("Invitations.accept")(function*(guid: string) {
        return yield* answer("accepted")(guid)
      })
      const decline = Effect.fn("Invitations.decline")(function*(guid: string) {
        return yield* answer("declined")(guid)
      })

      const changeRole = Effect.fn("Invitations.changeRole")(function*(id: number, role: Role) {
        const company = yield* requirePermission("invitation.update")
        return yield* transaction(Effect.gen(function*() {
          const found = yield* repo.find(company.id, id)
          if (Option.isNone(found)) return yield* invitationNotFound()
          const now = yield* Clock.currentTimeMillis
          yield* requirePending(found.value, now)
          yield* mayGrant(company, role)
          const updated = yield* repo.setRole(company.id, id, role)
          yield* events.emit(company.id, "invitation.updated", { id, role })
          return view(updated, now)
        }))
      })

      const revoke = Effect.fn("Invitations.revoke")(function*(id: number) {
        const company = yield* requirePermission("invitation.update")
        const actor = yield* CurrentActor
        return yield* transaction(Effect.gen(function*() {
          const found = yield* repo.find(company.id, id)
          if (Option.isNone(found)) return yield* invitationNotFound()
          const now = yield* Clock.currentTimeMillis
          yield* requirePending(found.value, now)
          const updated = yield* repo.answer(company.id, id, "revoked", actor.userId)
          yield* events.emit(company.id, "invitation.updated", { id, status: "revoked" })
          return view(updated, now)
        }))
      })

      const remove = Effect.fn("Invitations.delete")(function*(id: number) {
        const company = yield* requirePermission("invitation.delete")
        yield* transaction(Effect.gen(function*() {
          if (!(yield* repo.delete(company.id, id))) return yield* invitationNotFound()
          yield* events.emit(company.id, "invitation.deleted", { id })
        }))
      })

      return Invitations.of({ list, create, accept, decline, changeRole, revoke, delete: remove })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(InvitationsRepo.layer))
}

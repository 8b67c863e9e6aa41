import { Schema } from "effect"
import { Roles } from "../auth/Permissions.ts"
import { Email } from "../platform-admin/Domain.ts"

export const InvitationId = Schema.Int
export type InvitationId = typeof InvitationId.Type

/** `expired` is derived: a pending invitation past `expires_at`. */
export const InvitationStatuses = ["pending", "accepted", "declined", "revoked", "expired"] as const
export type InvitationStatus = typeof InvitationStatuses[number]

export const Role = Schema.Literals(Roles)

export const Invitation = Schema.Struct({
  id: InvitationId,
  company_id: Schema.Int,
  guid: Schema.String,
  invite_url: Schema.String,
  email: Schema.String,
  role: Role,
  status: Schema.Literals(InvitationStatuses),
  expires_at: Schema.String,
  created_at: Schema.String
}).annotate({ identifier: "Invitation" })
export type Invitation = typeof Invitation.Type

export const CreateInvitation = Schema.Struct({ email: Email, role: Role })
export type CreateInvitation = typeof CreateInvitation.Type

export const ChangeInvitationRole = Schema.Struct({ role: Role })
export type ChangeInvitationRole = typeof ChangeInvitationRole.Type

export const InvitationAnswer = Schema.Struct({
  data: Schema.Struct({ message: Schema.String, invitation: Invitation })
})

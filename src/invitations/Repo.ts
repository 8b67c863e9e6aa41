import type { CompanyId } from "../auth/Domain.ts"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { Role } from "../auth/Permissions.ts"

export interface InvitationRow {
  readonly id: number
  readonly company_id: CompanyId
  readonly guid: string
  readonly email: string
  readonly role: Role
  readonly status: "pending" | "accepted" | "declined" | "revoked"
  readonly expires_at: Date
  readonly created_at: Date
}

/** Invitations of one company; only `findByGuid` is global, because the guid is how an invitee names one. */
export class InvitationsRepo extends Context.Service<InvitationsRepo, {
  listPending(companyId: CompanyId): Effect.Effect<ReadonlyArray<InvitationRow>>
  /** Locks the row for the rest of the transaction. */
  find(companyId: CompanyId, id: number): Effect.Effect<Option.Option<InvitationRow>>
  /** Locks the row; the company comes from the invitation, not from the caller. */
  findByGuid(guid: string): Effect.Effect<Option.Option<InvitationRow>>
  insert(companyId: CompanyId, input: {
    readonly guid: string
    readonly email: string
    readonly role: Role
    readonly invited_by: number
    readonly expires_at: Date
  }): Effect.Effect<InvitationRow>
  /** Retires the pending invitation to this address, if any, so a new one can replace it. */
  revokePending(companyId: CompanyId, email: string): Effect.Effect<ReadonlyArray<number>>
  setRole(companyId: CompanyId, id: number, role: Role): Effect.Effect<InvitationRow>
  answer(
    companyId: CompanyId,
    id: number,
    status: "accepted" | "declined" | "revoked",
    userId: number
  ): Effect.Effect<InvitationRow>
  delete(companyId: CompanyId, id: number): Effect.Effect<boolean>
  isMemberByEmail(companyId: CompanyId, email: string): Effect.Effect<boolean>
  isMember(companyId: CompanyId, userId: number): Effect.Effect<boolean>
  /** The membership; the company becomes the user's active one when they had none (or a stale one). */
  join(companyId: CompanyId, userId: number, role: Role): Effect.Effect<void>
  companyName(companyId: CompanyId): Effect.Effect<string>
  lockCompany(companyId: CompanyId): Effect.Effect<void>
}>()("crm/invitations/InvitationsRepo") {
  static readonly layer = Layer.effect(
    InvitationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, company_id, guid::text AS guid, email, role, status, expires_at, created_at`
      const one = (rows: ReadonlyArray<InvitationRow>) => Option.fromNullishOr(rows[0])

      const listPending = (companyId: CompanyId) =>
        sql<InvitationRow>`
          SELECT ${columns} FROM invitations
          WHERE company_id = ${companyId} AND status = 'pending' ORDER BY id DESC`.pipe(Effect.orDie)

      const find = (companyId: CompanyId, id: number) =>
        sql<InvitationRow>`
          SELECT ${columns} FROM invitations WHERE company_id = ${companyId} AND id = ${id} FOR UPDATE`.pipe(
          Effect.map(one),
          Effect.orDie
        )

      const findByGuid = (guid: string) =>
        sql<InvitationRow>`SELECT ${columns} FROM invitations WHERE guid = ${guid}::uuid FOR UPDATE`.pipe(
          Effect.map(one),
          Effect.orDie
        )

      const insert: InvitationsRepo["Service"]["insert"] = (companyId, input) =>
        sql<InvitationRow>`
          INSERT INTO invitations ${sql.insert({ company_id: companyId, ...input })} RETURNING ${columns}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const revokePending = (companyId: CompanyId, email: string) =>
        sql<{ id: number }>`
          UPDATE invitations SET status = 'revoked', answered_at = now(), updated_at = now()
          WHERE company_id = ${companyId} AND status = 'pending' AND lower(email) = lower(${email})
          RETURNING id`.pipe(Effect.map((rows) => rows.map((row) => row.id)), Effect.orDie)

      const setRole = (companyId: CompanyId, id: number, role: Role) =>
        sql<InvitationRow>`
          UPDATE invitations SET role = ${role}, updated_at = now()
          WHERE company_id = ${companyId} AND id = ${id} RETURNING ${columns}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const answer = (companyId: CompanyId, id: number, status: "accepted" | "declined" | "revoked", userId: number) =>
        sql<InvitationRow>`
          UPDATE invitations SET status = ${status}, answered_by = ${userId}, answered_at = now(), updated_at = now()
          WHERE company_id = ${companyId} AND id = ${id} RETURNING ${columns}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const remove = (companyId: CompanyId, id: number) =>
        sql<{ id: number }>`DELETE FROM invitations WHERE company_id = ${companyId} AND id = ${id} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const isMemberByEmail = (companyId: CompanyId, email: string) =>
        sql<{ n: number }>`
          SELECT count(*)::int AS n FROM memberships m JOIN users u ON u.id = m.user_id
          WHERE m.company_id = ${companyId} AND lower(u.email) = lower(${email})`.pipe(
          Effect.map((rows) => rows[0].n > 0),
          Effect.orDie
        )

      const isMember = (companyId: CompanyId, userId: number) =>
        sql<{ n: number }>`
          SELECT count(*)::int AS n FROM memberships WHERE company_id = ${companyId} AND user_id = ${userId}`.pipe(
          Effect.map((rows) => rows[0].n > 0),
          Effect.orDie
        )

      const join = (companyId: CompanyId, userId: number, role: Role) =>
        Effect.gen(function*() {
          yield* sql`INSERT INTO memberships (company_id, user_id, role) VALUES (${companyId}, ${userId}, ${role})`
          yield* sql`
            UPDATE users SET current_company_id = ${companyId}, updated_at = now()
            WHERE id = ${userId} AND (current_company_id IS NULL OR NOT EXISTS (
              SELECT 1 FROM memberships m WHERE m.user_id = users.id AND m.company_id = users.current_company_id))`
        }).pipe(Effect.orDie)

      const companyName = (companyId: CompanyId) =>
        sql<{ name: string }>`SELECT name FROM companies WHERE id = ${companyId}`.pipe(
          Effect.map((rows) => rows[0]?.name ?? ""),
          Effect.orDie
        )

      const lockCompany = (companyId: CompanyId) =>
        sql`SELECT id FROM companies WHERE id = ${companyId} FOR NO KEY UPDATE`.pipe(Effect.asVoid, Effect.orDie)

      return InvitationsRepo.of({
        listPending,
        find,
        findByGuid,
        insert,
        revokePending,
        setRole,
        answer,
        delete: remove,
        isMemberByEmail,
        isMember,
        join,
        companyName,
        lockCompany
      })
    })
  )
}

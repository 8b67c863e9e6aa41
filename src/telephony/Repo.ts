import type { CompanyId } from "../auth/Domain.ts"
import { Context, Data, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"

export interface MemberRow {
  readonly user_id: number
  readonly name: string
  readonly email: string | null
  readonly role: string
  readonly is_service_account: boolean
  readonly availability: string
}

/** Passwords here are sealed by SipVault. */
export interface OperatorRow {
  readonly user_id: number
  readonly extension: string | null
  readonly web_sip_username: string
  readonly web_sip_password: string
  readonly native_sip_username: string
  readonly native_sip_password: string
  readonly native_enabled: boolean
}

export interface MemberWithOperator extends MemberRow {
  readonly operator: OperatorRow | null
}

export interface NewOperator {
  readonly web_sip_username: string
  readonly web_sip_password: string
  readonly native_sip_username: string
  readonly native_sip_password: string
}

export interface CallAttempt {
  readonly caller_user_id: number
  readonly kind: "internal" | "external"
  readonly callee_user_id: number | null
  readonly extension: string | null
  readonly number: string | null
  readonly contact_id: number | null
  readonly status: "initiated" | "failed"
  readonly pbx_call_id: string | null
}

/** A dialog event Kamailio reported (`kamailio.call_events`) for a call the API placed. */
export interface CallEvent {
  readonly id: number
  readonly company_id: number
  readonly attempt_id: number
  readonly leg: "caller" | "callee"
  readonly kind: "answered" | "ended" | "failed"
  readonly sip_code: number
  readonly side: string
  readonly at: Date
}

/** A call attempt once it ended: what `call.ended` carries. */
export interface EndedCall {
  readonly id: number
  readonly kind: "internal" | "external"
  readonly caller_user_id: number | null
  readonly callee_user_id: number | null
  readonly extension: string | null
  readonly number: string | null
  readonly contact_id: number | null
  readonly created_at: Date
  readonly answered_at: Date | null
  readonly ended_at: Date
  readonly duration_seconds: number
  readonly hangup_cause: string
}

export class ExtensionTaken extends Data.TaggedError("ExtensionTaken")<{}> {}

type Joined = MemberRow & { readonly [K in keyof OperatorRow as `op_${K}`]: OperatorRow[K] | null }

const split = (row: Joined): MemberWithOperator => ({
  user_id: row.user_id,
  name: row.name,
  email: row.email,
  role: row.role,
  is_service_account: row.is_service_account,
  availability: row.availability,
  operator: row.op_user_id === null ? null : {
    user_id: row.op_user_id,
    extension: row.op_extension,
    web_sip_username: row.op_web_sip_username!,
    web_sip_password: row.op_web_sip_password!,
    native_sip_username: row.op_native_sip_username!,
    native_sip_password: row.op_native_sip_password!,
    native_enabled: row.op_native_enabled!
  }
})

/** Members are users holding a membership of the company; every query names the company. */
export class TelephonyRepo extends Context.Service<TelephonyRepo, {
  /** Real members (no service accounts) with their operator row, if any. */
  listMembers(companyId: CompanyId): Effect.Effect<ReadonlyArray<MemberWithOperator>>
  findMember(companyId: CompanyId, userId: number): Effect.Effect<Option.Option<MemberWithOperator>>
  /** The operator row locked for the rest of the transaction. */
  lockOperator(companyId: CompanyId, userId: number): Effect.Effect<Option.Option<OperatorRow>>
  findOperatorByExtension(companyId: CompanyId, extension: string): Effect.Effect<Option.Option<MemberWithOperator>>
  /** Enabled operators of the company except `exceptUserId`. */
  listColleagues(companyId: CompanyId, exceptUserId: number): Effect.Effect<ReadonlyArray<MemberWithOperator>>
  /** None when a concurrent request created the row first. */
  insertOperator(companyId: CompanyId, userId: number, row: NewOperator): Effect.Effect<Option.Option<OperatorRow>>
  deleteOperator(companyId: CompanyId, userId: number): Effect.Effect<Option.Option<OperatorRow>>
  setExtension(companyId: CompanyId, userId: number, extension: string | null): Effect.Effect<Option.Option<OperatorRow>, ExtensionTaken>
  setPasswords(
    companyId: CompanyId,
    userId: number,
    passwords: { readonly web: string; readonly native: string | null }
  ): Effect.Effect<Option.Option<OperatorRow>>
  companyTelephonyEnabled(companyId: CompanyId): Effect.Effect<boolean>
  contactExists(companyId: CompanyId, contactId: number): Effect.Effect<boolean>
  insertCallAttempt(companyId: CompanyId, attempt: CallAttempt): Effect.Effect<number>
  /**
   * The oldest reported dialog events whose call attempt exists (of every company: Kamailio writes
   * them for all), locked and deleted in the caller's transaction. Events of an attempt not yet
   * committed wait for the next claim.
   */
  claimCallEvents(limit: number): Effect.Effect<ReadonlyArray<CallEvent>>
  /** Events that never found their attempt (the API's insert failed) go after an hour. */
  readonly dropOrphanCallEvents: Effect.Effect<void>
  recordAnswered(companyId: CompanyId, attemptId: number, at: Date): Effect.Effect<void>
  /** Ends the call once: None when it had already ended. */
  recordEnd(companyId: CompanyId, attemptId: number, at: Date, cause: string): Effect.Effect<Option.Option<EndedCall>>
}>()("crm/telephony/TelephonyRepo") {
  static readonly layer = Layer.effect(
    TelephonyRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const operatorColumns = sql`user_id, extension, web_sip_username, web_sip_password, native_sip_username,
        native_sip_password, native_enabled`
      const joined = sql`
        SELECT u.id AS user_id, u.name, u.email, m.role, u.is_service_account, u.availability,
               t.user_id AS op_user_id, t.extension AS op_extension,
               t.web_sip_username AS op_web_sip_username, t.web_sip_password AS op_web_sip_password,
               t.native_sip_username AS op_native_sip_username, t.native_sip_password AS op_native_sip_password,
               t.native_enabled AS op_native_enabled
        FROM memberships m
        JOIN users u ON u.id = m.user_id
        LEFT JOIN telephony_operators t ON t.company_id = m.company_id AND t.user_id = m.user_id`

      const listMembers = (companyId: CompanyId) =>
        sql<Joined>`${joined} WHERE m.company_id = ${companyId} AND NOT u.is_service_account ORDER BY u.id`.pipe(
          Effect.map((rows) => rows.map(split)),
          Effect.orDie
        )

      const findMember = (companyId: CompanyId, userId: number) =>
        sql<Joined>`${joined} WHERE m.company_id = ${companyId} AND m.user_id = ${userId}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), split)),
          Effect.orDie
        )

      const lockOperator = (companyId: CompanyId, userId: number) =>
        sql<OperatorRow>`
          SELECT ${operatorColumns} FROM telephony_operators
          WHERE company_id = ${companyId} AND user_id = ${userId} FOR UPDATE`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const findOperatorByExtension = (companyId: CompanyId, extension: string) =>
        sql<Joined>`${joined} WHERE m.company_id = ${companyId} AND t.extension = ${extension}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), split)),
          Effect.orDie
        )

      const listColleagues = (companyId: CompanyId, exceptUserId: number) =>
        sql<Joined>`
          ${joined}
          WHERE m.company_id = ${companyId} AND t.user_id IS NOT NULL AND u.id <> ${exceptUserId}
            AND NOT u.is_service_account
          ORDER BY t.extension NULLS LAST, u.name, u.id`.pipe(
          Effect.map((rows) => rows.map(split)),
          Effect.orDie
        )

      const insertOperator = (companyId: CompanyId, userId: number, row: NewOperator) =>
        sql<OperatorRow>`
          INSERT INTO telephony_operators ${sql.insert({ company_id: companyId, user_id: userId, ...row })}
          ON CONFLICT (company_id, user_id) DO NOTHING
          RETURNING ${operatorColumns}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const deleteOperator = (companyId: CompanyId, userId: number) =>
        sql<OperatorRow>`
          DELETE FROM telephony_operators WHERE company_id = ${companyId} AND user_id = ${userId}
          RETURNING ${operatorColumns}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const setExtension = (companyId: CompanyId, userId: number, extension: string | null) =>
        sql<OperatorRow>`
          UPDATE telephony_operators SET extension = ${extension}, updated_at = now()
          WHERE company_id = ${companyId} AND user_id = ${userId}
          RETURNING ${operatorColumns}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.catchTag("SqlError", (error) =>
            error.reason._tag === "UniqueViolation" ? Effect.fail(new ExtensionTaken()) : Effect.die(error))
        )

      const setPasswords = (companyId: CompanyId, userId: number, passwords: { readonly web: string; readonly native: string | null }) =>
        sql<OperatorRow>`
          UPDATE telephony_operators SET
            web_sip_password = ${passwords.web},
            native_sip_password = COALESCE(${passwords.native}, native_sip_password),
            updated_at = now()
          WHERE company_id = ${companyId} AND user_id = ${userId}
          RETURNING ${operatorColumns}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const companyTelephonyEnabled = (companyId: CompanyId) =>
        sql<{ readonly telephony_enabled: boolean }>`SELECT telephony_enabled FROM companies WHERE id = ${companyId}`.pipe(
          Effect.map((rows) => rows[0]?.telephony_enabled === true),
          Effect.orDie
        )

      const contactExists = (companyId: CompanyId, contactId: number) =>
        sql`SELECT 1 FROM contacts WHERE company_id = ${companyId} AND id = ${contactId} AND deleted_at IS NULL`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const insertCallAttempt = (companyId: CompanyId, attempt: CallAttempt) =>
        sql<{ readonly id: number }>`
          INSERT INTO call_attempts ${sql.insert({ company_id: companyId, ...attempt })} RETURNING id`.pipe(
          Effect.map((rows) => rows[0].id),
          Effect.orDie
        )

      const claimCallEvents = (limit: number) =>
        sql<CallEvent>`
          WITH claimed AS (
            SELECT e.id FROM kamailio.call_events e
            WHERE EXISTS (SELECT 1 FROM call_attempts a WHERE a.pbx_call_id = e.call_ref)
            ORDER BY e.id LIMIT ${limit} FOR UPDATE SKIP LOCKED
          ), gone AS (
            DELETE FROM kamailio.call_events e USING claimed WHERE e.id = claimed.id
            RETURNING e.id, e.call_ref, e.leg, e.kind, e.sip_code, e.side, e.at
          )
          SELECT gone.id, a.company_id, a.id AS attempt_id, gone.leg, gone.kind, gone.sip_code, gone.side, gone.at
          FROM gone JOIN call_attempts a ON a.pbx_call_id = gone.call_ref
          ORDER BY gone.id`.pipe(Effect.orDie)

      const dropOrphanCallEvents = sql`
        DELETE FROM kamailio.call_events e
        WHERE e.at < now() - interval '1 hour'
          AND NOT EXISTS (SELECT 1 FROM call_attempts a WHERE a.pbx_call_id = e.call_ref)`.pipe(Effect.asVoid, Effect.orDie)

      const recordAnswered = (companyId: CompanyId, attemptId: number, at: Date) =>
        sql`
          UPDATE call_attempts SET answered_at = ${at}
          WHERE company_id = ${companyId} AND id = ${attemptId} AND answered_at IS NULL AND ended_at IS NULL`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const recordEnd = (companyId: CompanyId, attemptId: number, at: Date, cause: string) =>
        sql<EndedCall>`
          UPDATE call_attempts SET
            ended_at = ${at},
            hangup_cause = ${cause},
            duration_seconds = CASE WHEN answered_at IS NULL THEN 0
              ELSE GREATEST(0, round(extract(epoch FROM ${at}::timestamptz - answered_at)))::int END
          WHERE company_id = ${companyId} AND id = ${attemptId} AND ended_at IS NULL
          RETURNING id, kind, caller_user_id, callee_user_id, extension, number, contact_id, created_at,
            answered_at, ended_at, duration_seconds, hangup_cause`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      return TelephonyRepo.of({
        listMembers,
        findMember,
        lockOperator,
        findOperatorByExtension,
        listColleagues,
        insertOperator,
        deleteOperator,
        setExtension,
        setPasswords,
        companyTelephonyEnabled,
        contactExists,
        insertCallAttempt,
        claimCallEvents,
        dropOrphanCallEvents,
        recordAnswered,
        recordEnd
      })
    })
  )
}

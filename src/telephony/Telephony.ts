import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { type CompanyId, CurrentActor, currentCompany, requirePermission, requirePersonalCredential } from "../auth/Domain.ts"
import { randomToken } from "../platform/Crypto.ts"
import {
  BadGateway,
  type Forbidden,
  invalidField,
  type NotFound,
  notFound,
  ruleViolation,
  type TooManyRequests,
  type Unprocessable
} from "../platform/Errors.ts"
import { normalizePhone } from "../platform/Phones.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { companySipHost, TelephonyConfig } from "./Config.ts"
import {
  type BrowserCredentials,
  type CallStarted,
  type Colleague,
  type ExternalCall,
  type InternalCall,
  type MemberTelephony,
  type NativeCredentials,
  nativeUsername,
  normalizeExtension,
  provisioningUri,
  type SipLogin,
  webUsername
} from "./Domain.ts"
import { type CallTarget, Pbx, type PbxError, type SipProfileKind } from "./Pbx.ts"
import { type CallAttempt, type MemberWithOperator, type OperatorRow, TelephonyRepo } from "./Repo.ts"
import { SipVault } from "./Vault.ts"

const CODECS = ["opus", "PCMU", "PCMA"] as const
const PASSWORD_LENGTH = 24

const memberNotFound = () => notFound("Member not found.")
const memberTelephonyOff = () => ruleViolation("telephony_disabled", "Telephony is not enabled for this member.")
const ownTelephonyOff = () => ruleViolation("telephony_disabled", "Telephony is not enabled for your account.")
const companyTelephonyOff = () => ruleViolation("company_telephony_disabled", "Telephony is not enabled for this company.")
const pbxUnavailable = () => new BadGateway({ message: "The telephony server could not be reached. Try again later." })

type Admin = Forbidden | NotFound | Unprocessable
type Self = Forbidden | Unprocessable

/** Operator telephony: the admin side (company_telephony.manage) and the operator's own softphone. */
export class Telephony extends Context.Service<Telephony, {
  readonly listMembers: Effect.Effect<ReadonlyArray<MemberTelephony>, Forbidden, CurrentActor>
  enable(memberId: number): Effect.Effect<MemberTelephony, Admin | BadGateway, CurrentActor>
  disable(memberId: number): Effect.Effect<MemberTelephony, Admin | BadGateway, CurrentActor>
  credentials(memberId: number): Effect.Effect<NativeCredentials, Admin, CurrentActor>
  resetPassword(memberId: number): Effect.Effect<SipLogin, Admin | BadGateway, CurrentActor>
  setExtension(memberId: number, extension: string | null): Effect.Effect<MemberTelephony, Admin, CurrentActor>
  readonly ownCredentials: Effect.Effect<BrowserCredentials, Self, CurrentActor>
  readonly resetOwnPassword: Effect.Effect<BrowserCredentials, Self | BadGateway, CurrentActor>
  readonly ownNativeCredentials: Effect.Effect<NativeCredentials, Self, CurrentActor>
  readonly resetOwnNativePassword: Effect.Effect<NativeCredentials, Self | BadGateway, CurrentActor>
  readonly colleagues: Effect.Effect<ReadonlyArray<Colleague>, Self, CurrentActor>
  internalCall(input: InternalCall): Effect.Effect<CallStarted, Self | TooManyRequests | BadGateway, CurrentActor>
  externalCall(input: ExternalCall): Effect.Effect<CallStarted, Self | TooManyRequests | BadGateway, CurrentActor>
}>()("crm/telephony/Telephony") {
  static readonly layerNoDeps = Layer.effect(
    Telephony,
    Effect.gen(function*() {
      const repo = yield* TelephonyRepo
      const pbx = yield* Pbx
      const vault = yield* SipVault
      const config = yield* TelephonyConfig
      const limiter = yield* RateLimiter
      const sql = yield* SqlClient.SqlClient

      const aad = (companyId: CompanyId, userId: number, kind: SipProfileKind) => `${companyId}:${userId}:${kind}`
      const seal = (companyId: CompanyId, userId: number, kind: SipProfileKind, password: string) =>
        vault.seal(password, aad(companyId, userId, kind))
      const passwordsOf = Effect.fnUntraced(function*(companyId: CompanyId, op: OperatorRow) {
        return {
          web: yield* vault.open(op.web_sip_password, aad(companyId, op.user_id, "web")),
          native: yield* vault.open(op.native_sip_password, aad(companyId, op.user_id, "native"))
        }
      })

      /** Pushes both profiles with their current passwords; the PBX keeps registrations whose password is unchanged. */
      const syncProfiles = Effect.fnUntraced(function*(companyId: CompanyId, op: OperatorRow) {
        const passwords = yield* passwordsOf(companyId, op)
        yield* pbx.upsertProfile({
          companyId,
          userId: op.user_id,
          kind: "web",
          username: op.web_sip_username,
          password: passwords.web
        })
        yield* pbx.upsertProfile({
          companyId,
          userId: op.user_id,
          kind: "native",
          username: op.native_sip_username,
          password: passwords.native
        })
        return passwords
      })

      // Best effort by contract: any PBX failure reads as "not registered".
      const registered = (companyId: CompanyId, username: string) =>
        pbx.isRegistered(companyId, username).pipe(
          Effect.timeout("2 seconds"),
          Effect.catchCause(() => Effect.succeed(false))
        )

      const anyRegistered = (companyId: CompanyId, op: OperatorRow) =>
        Effect.map(
          Effect.all([registered(companyId, op.web_sip_username), registered(companyId, op.native_sip_username)], {
            concurrency: 2
          }),
          ([web, native]) => web || native
        )

      const memberView = Effect.fnUntraced(function*(companyId: CompanyId, member: MemberWithOperator) {
        const op = member.operator
        return {
          user_id: member.user_id,
          name: member.name,
          email: member.email,
          role: member.role,
          enabled: op !== null,
          extension: op?.extension ?? null,
          native_enabled: op?.native_enabled ?? false,
          registered: op === null ? false : yield* anyRegistered(companyId, op)
        } satisfies MemberTelephony
      })

      const nativeView = Effect.fnUntraced(function*(companyId: CompanyId, op: OperatorRow, password: string) {
        return {
          sip_username: op.native_sip_username,
          sip_password: password,
          host: companySipHost(config, companyId),
          tcp_port: config.tcpPort,
          tls_port: config.tlsPort,
          default_transport: "TCP" as const,
          codecs: [...CODECS],
          media_encryption: config.mediaEncryption,
          registered: yield* registered(companyId, op.native_sip_username),
          provisioning_uri: provisioningUri(op.native_sip_username, password, companySipHost(config, companyId), config.tcpPort)
        } satisfies NativeCredentials
      })

      const browserView = Effect.fnUntraced(function*(companyId: CompanyId, member: MemberWithOperator, op: OperatorRow, password: string) {
        return {
          sip_username: op.web_sip_username,
          sip_password: password,
          host: companySipHost(config, companyId),
          wss_url: config.wssUrl,
          extension: op.extension,
          display_name: member.name,
          registered: yield* registered(companyId, op.web_sip_username)
        } satisfies BrowserCredentials
      })

      const pbxFailed = (error: PbxError) =>
        Effect.andThen(Effect.logWarning("PBX call failed", error.message), Effect.fail(pbxUnavailable()))

      // ---- admin side -------------------------------------------------------------

      const manage = requirePermission("company_telephony.manage")

      const memberOf = Effect.fnUntraced(function*(companyId: CompanyId, memberId: number) {
        const member = yield* repo.findMember(companyId, memberId)
        if (Option.isNone(member)) return yield* memberNotFound()
        return member.value
      })

      const operatorOf = Effect.fnUntraced(function*(companyId: CompanyId, memberId: number) {
        const member = yield* memberOf(companyId, memberId)
        if (member.operator === null) return yield* memberTelephonyOff()
        return { member, op: member.operator }
      })

      const listMembers = Effect.gen(function*() {
        const company = yield* manage
        const members = yield* repo.listMembers(company.id)
        return yield* Effect.forEach(members, (member) => memberView(company.id, member), { concurrency: 8 })
      }).pipe(Effect.withSpan("Telephony.listMembers"))

      const enable = Effect.fn("Telephony.enable")(function*(memberId: number) {
        const company = yield* manage
        const member = yield* memberOf(company.id, memberId)
        if (member.is_service_account) {
          return yield* ruleViolation("service_account", "Telephony cannot be enabled for a service account.")
        }
        if (!(yield* repo.companyTelephonyEnabled(company.id))) return yield* companyTelephonyOff()
        // Enabling an operator who is already on re-pushes both profiles: a safe retry after a PBX failure.
        const op = yield* Effect.gen(function*() {
          const existing = yield* repo.lockOperator(company.id, memberId)
          const op = Option.isSome(existing) ? existing.value : yield* Effect.flatMap(
            repo.insertOperator(company.id, memberId, {
              web_sip_username: webUsername(memberId),
              web_sip_password: seal(company.id, memberId, "web", randomToken(PASSWORD_LENGTH)),
              native_sip_username: nativeUsername(memberId),
              native_sip_password: seal(company.id, memberId, "native", randomToken(PASSWORD_LENGTH))
            }),
            (inserted) => Option.isSome(inserted) ? Effect.succeed(inserted.value) : Effect.flatMap(
              repo.lockOperator(company.id, memberId),
              (row) => Option.isSome(row) ? Effect.succeed(row.value) : Effect.die(new Error("operator row vanished"))
            )
          )
          yield* syncProfiles(company.id, op)
          return op
        }).pipe(sql.withTransaction, Effect.catchTag("PbxError", pbxFailed), Effect.catchTag("SqlError", Effect.die))
        return yield* memberView(company.id, { ...member, operator: op })
      })

      const disable = Effect.fn("Telephony.disable")(function*(memberId: number) {
        const company = yield* manage
        const member = yield* memberOf(company.id, memberId)
        yield* Effect.gen(function*() {
          const removed = yield* repo.deleteOperator(company.id, memberId)
          if (Option.isSome(removed)) {
            yield* pbx.removeProfile(company.id, removed.value.web_sip_username)
            yield* pbx.removeProfile(company.id, removed.value.native_sip_username)
          }
        }).pipe(sql.withTransaction, Effect.catchTag("PbxError", pbxFailed), Effect.catchTag("SqlError", Effect.die))
        return yield* memberView(company.id, { ...member, operator: null })
      })

      const credentials = Effect.fn("Telephony.credentials")(function*(memberId: number) {
        const company = yield* manage
        const { op } = yield* operatorOf(company.id, memberId)
        const password = yield* vault.open(op.native_sip_password, aad(company.id, op.user_id, "native"))
        return yield* nativeView(company.id, op, password)
      })

      /** New passwords in the row and on the PBX together; `native: false` keeps the native one. */
      const rotate = Effect.fnUntraced(function*(companyId: CompanyId, userId: number, rotateNative: boolean) {
        return yield* Effect.gen(function*() {
          const web = randomToken(PASSWORD_LENGTH)
          const native = rotateNative ? randomToken(PASSWORD_LENGTH) : null
          const updated = yield* repo.setPasswords(companyId, userId, {
            web: seal(companyId, userId, "web", web),
            native: native === null ? null : seal(companyId, userId, "native", native)
          })
          if (Option.isNone(updated)) return Option.none()
          const passwords = yield* syncProfiles(companyId, updated.value)
          return Option.some({ op: updated.value, passwords })
        }).pipe(sql.withTransaction, Effect.catchTag("PbxError", pbxFailed), Effect.catchTag("SqlError", Effect.die))
      })

      const resetPassword = Effect.fn("Telephony.resetPassword")(function*(memberId: number) {
        const company = yield* manage
        yield* operatorOf(company.id, memberId)
        const rotated = yield* rotate(company.id, memberId, true)
        if (Option.isNone(rotated)) return yield* memberTelephonyOff()
        // Spec: only the browser login is answered; the native one is read through credentials.
        return { sip_username: rotated.value.op.web_sip_username, sip_password: rotated.value.passwords.web }
      })

      const setExtension = Effect.fn("Telephony.setExtension")(function*(memberId: number, extension: string | null) {
        const company = yield* manage
        const { member } = yield* operatorOf(company.id, memberId)
        const value = normalizeExtension(extension)
        if (value === undefined) return yield* invalidField("extension", "The extension must be 3 or 4 digits.")
        const updated = yield* repo.setExtension(company.id, memberId, value).pipe(
          Effect.catchTag("ExtensionTaken", () => invalidField("extension", "The extension has already been taken."))
        )
        if (Option.isNone(updated)) return yield* memberTelephonyOff()
        return yield* memberView(company.id, { ...member, operator: updated.value })
      })

      // ---- the operator's own softphone -----------------------------------------------

      /** Session or mobile token of a person whose telephony is on in the active company. */
      const self = Effect.gen(function*() {
        const actor = yield* requirePersonalCredential
        const company = yield* currentCompany
        const member = yield* repo.findMember(company.id, actor.userId)
        if (Option.isNone(member) || member.value.operator === null) return yield* ownTelephonyOff()
        return { actor, company, member: member.value, op: member.value.operator }
      })

      const ownCredentials = Effect.gen(function*() {
        const { company, member, op } = yield* self
        const password = yield* vault.open(op.web_sip_password, aad(company.id, op.user_id, "web"))
        return yield* browserView(company.id, member, op, password)
      }).pipe(Effect.withSpan("Telephony.ownCredentials"))

      const resetOwnPassword = Effect.gen(function*() {
        const { company, member } = yield* self
        const rotated = yield* rotate(company.id, member.user_id, false)
        if (Option.isNone(rotated)) return yield* ownTelephonyOff()
        return yield* browserView(company.id, member, rotated.value.op, rotated.value.passwords.web)
      }).pipe(Effect.withSpan("Telephony.resetOwnPassword"))

      const ownNativeCredentials = Effect.gen(function*() {
        const { company, op } = yield* self
        const password = yield* vault.open(op.native_sip_password, aad(company.id, op.user_id, "native"))
        return yield* nativeView(company.id, op, password)
      }).pipe(Effect.withSpan("Telephony.ownNativeCredentials"))

      const resetOwnNativePassword = Effect.gen(function*() {
        const { company, member } = yield* self
        const rotated = yield* rotate(company.id, member.user_id, true)
        if (Option.isNone(rotated)) return yield* ownTelephonyOff()
        return yield* nativeView(company.id, rotated.value.op, rotated.value.passwords.native)
      }).pipe(Effect.withSpan("Telephony.resetOwnNativePassword"))

      const colleagues = Effect.gen(function*() {
        const { company, member } = yield* self
        const rows = yield* repo.listColleagues(company.id, member.user_id)
        return rows.map((row) => ({
          user_id: row.user_id,
          name: row.name,
          email: row.email,
          extension: row.operator?.extension ?? null,
          availability: row.availability
        }))
      }).pipe(Effect.withSpan("Telephony.colleagues"))

      /** The shared originate gate: operator, per-user limit (counted per request), company telephony on. */
      const originating = Effect.gen(function*() {
        const caller = yield* self
        yield* limiter.enforce({ companyId: caller.company.id }, `originate:${caller.actor.userId}`, {
          limit: config.originateLimit,
          windowSeconds: config.originateWindowSeconds
        })
        if (!(yield* repo.companyTelephonyEnabled(caller.company.id))) return yield* companyTelephonyOff()
        return caller
      })

      const place = Effect.fnUntraced(function*(
        companyId: CompanyId,
        caller: OperatorRow,
        to: CallTarget,
        attempt: Omit<CallAttempt, "status" | "pbx_call_id" | "caller_user_id">
      ) {
        const started = yield* Effect.result(pbx.originate({
          companyId,
          callerUserId: caller.user_id,
          from: caller.web_sip_username,
          to
        }))
        const base = { ...attempt, caller_user_id: caller.user_id }
        if (started._tag === "Failure") {
          yield* repo.insertCallAttempt(companyId, { ...base, status: "failed", pbx_call_id: null })
          yield* Effect.logWarning("PBX originate failed", started.failure.message)
          return yield* pbxUnavailable()
        }
        const id = yield* repo.insertCallAttempt(companyId, { ...base, status: "initiated", pbx_call_id: started.success.callId })
        return { call_id: id, status: "initiated" as const }
      })

      const internalCall = Effect.fn("Telephony.internalCall")(function*(input: InternalCall) {
        const { company, member, op } = yield* originating
        const byId = input.callee_user_id ?? null
        const rawExtension = input.extension ?? null
        const byExtension = rawExtension === null || rawExtension.trim() === "" ? null : rawExtension
        if ((byId === null) === (byExtension === null)) {
          return yield* invalidField("callee_user_id", "Give either callee_user_id or extension, not both.")
        }
        let callee: MemberWithOperator
        if (byId !== null) {
          const found = yield* repo.findMember(company.id, byId)
          if (Option.isNone(found) || found.value.operator === null || found.value.is_service_account) {
            return yield* invalidField("callee_user_id", "The selected colleague does not have telephony enabled.")
          }
          callee = found.value
        } else {
          const extension = normalizeExtension(byExtension)
          if (extension == null) return yield* invalidField("extension", "The extension must be 3 or 4 digits.")
          const found = yield* repo.findOperatorByExtension(company.id, extension)
          if (Option.isNone(found) || found.value.operator === null) {
            return yield* invalidField("extension", "No colleague has this extension.")
          }
          callee = found.value
        }
        if (callee.user_id === member.user_id) {
          return yield* invalidField(byId !== null ? "callee_user_id" : "extension", "You cannot call yourself.")
        }
        const calleeOp = callee.operator!
        return yield* place(company.id, op, {
          kind: "internal",
          calleeUserId: callee.user_id,
          usernames: [calleeOp.web_sip_username, calleeOp.native_sip_username]
        }, {
          kind: "internal",
          callee_user_id: callee.user_id,
          extension: calleeOp.extension,
          number: null,
          contact_id: null
        })
      })

      const externalCall = Effect.fn("Telephony.externalCall")(function*(input: ExternalCall) {
        const { company, op } = yield* originating
        const number = normalizePhone(input.number, company.defaultCountry ?? null)
        if (number === undefined) return yield* invalidField("number", "The number field must be a valid phone number.")
        const contactId = input.contact_id ?? null
        // Spec: a foreign or unknown contact is refused, never replaced by a lookup of the number.
        if (contactId !== null && !(yield* repo.contactExists(company.id, contactId))) {
          return yield* invalidField("contact_id", "The selected contact is invalid.")
        }
        return yield* place(company.id, op, { kind: "external", number }, {
          kind: "external",
          callee_user_id: null,
          extension: null,
          number,
          contact_id: contactId
        })
      })

      return Telephony.of({
        listMembers,
        enable,
        disable,
        credentials,
        resetPassword,
        setExtension,
        ownCredentials,
        resetOwnPassword,
        ownNativeCredentials,
        resetOwnNativePassword,
        colleagues,
        internalCall,
        externalCall
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide(SipVault.layer.pipe(Layer.provideMerge(TelephonyConfig.layer))),
    Layer.provide(TelephonyRepo.layer)
  )
}

/**
 * For the membership revoke path: the operator row goes with the membership (foreign key
 * in 0006), this drops both SIP profiles on the PBX so the old credentials stop working.
 * Best effort: a PBX outage must not block revoking access, so failures are only logged.
 */
export const releaseOperator = (companyId: number, userId: number) =>
  Effect.gen(function*() {
    const pbx = yield* Pbx
    yield* pbx.removeProfile(companyId, webUsername(userId))
    yield* pbx.removeProfile(companyId, nativeUsername(userId))
  }).pipe(
    Effect.catchTag("PbxError", (error) => Effect.logWarning("PBX profile removal failed", error.message)),
    Effect.withSpan("Telephony.releaseOperator")
  )

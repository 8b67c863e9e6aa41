import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { CurrentActor, currentCompany, requirePermission } from "../auth/Domain.ts"
import { channelRules } from "../channels/Provider.ts"
import { windowClosed } from "../messages/Rules.ts"
import { type Forbidden, type NotFound, notFound, ruleViolation, type Unprocessable } from "../platform/Errors.ts"
import { addResponseHeaders } from "../platform/HttpKernel.ts"
import { ChannelAccess } from "../teams/ChannelAccess.ts"
import { contactNotFound } from "./Contacts.ts"
import { CallPermissionLimit, type Eligibility } from "./Domain.ts"
import { type ChannelRef, type ContactRow, ContactsRepo, type PermissionRequestRow } from "./Repo.ts"

const hour = 3_600_000
const day = 24 * hour
/** The business messenger's call-permission rules: one request a day, two a week; an answer lasts 7 days. */
export const callPermission = { perDay: 1, perWeek: 2, validMs: 7 * day } as const

const seconds = (ms: number) => Math.floor(ms / 1000)

const channelNotFound = () => notFound("Channel not found.")

interface CallState {
  readonly status: Eligibility["call"]["permission_status"]
  readonly expiresAt: number | null
  readonly attemptsRemaining: number
  readonly cooldownUntil: number | null
}

/** The permission as the newest request in the last week left it, and what the request limits allow now. */
export const callState = (requests: ReadonlyArray<PermissionRequestRow>, now: number): CallState => {
  const recent = requests.filter((r) => r.requested_at.getTime() > now - callPermission.validMs)
  const latest = recent[0]
  let status: CallState["status"] = "none"
  let expiresAt: number | null = null
  if (latest !== undefined) {
    const expires = latest.expires_at?.getTime() ?? latest.requested_at.getTime() + callPermission.validMs
    if (expires > now) {
      status = latest.status
      expiresAt = expires
    }
  }
  let cooldown = 0
  const today = recent.filter((r) => r.requested_at.getTime() > now - day)
  if (today.length >= callPermission.perDay) {
    cooldown = Math.max(cooldown, today[callPermission.perDay - 1].requested_at.getTime() + day)
  }
  if (recent.length >= callPermission.perWeek) {
    cooldown = Math.max(cooldown, recent[callPermission.perWeek - 1].requested_at.getTime() + callPermission.validMs)
  }
  return {
    status,
    expiresAt,
    attemptsRemaining: Math.max(0, callPermission.perWeek - recent.length),
    cooldownUntil: cooldown > now ? cooldown : null
  }
}

/**
 * Outbound eligibility of a contact on one channel: the messaging window (the rule of the send
 * path) and whether a call can be placed. The company's SIP trunk needs no permission; the
 * business messenger (msgr_a_business) calls only with the contact's permission, asked for
 * through call-permission requests; the other messengers cannot carry calls.
 */
export class ContactEligibility extends Context.Service<ContactEligibility, {
  eligibility(id: number, channelId: number | "sip" | undefined): Effect.Effect<Eligibility, Forbidden | NotFound, CurrentActor>
  requestCallPermission(id: number, channelId: number): Effect.Effect<Eligibility, Forbidden | NotFound | Unprocessable | CallPermissionLimit, CurrentActor>
}>()("crm/contacts/ContactEligibility") {
  static readonly layerNoDeps = Layer.effect(
    ContactEligibility,
    Effect.gen(function*() {
      const repo = yield* ContactsRepo
      const access = yield* ChannelAccess
      const sql = yield* SqlClient.SqlClient

      /** Both routes exist only for companies with telephony: elsewhere they answer as unknown routes. */
      const telephonyRoute = Effect.fnUntraced(function*(path: string, permission: string) {
        const company = yield* currentCompany
        if (!(yield* repo.telephonyEnabled(company.id))) return yield* notFound(`The route ${path} could not be found.`)
        return yield* requirePermission(permission)
      })

      const visibleChannel = Effect.fnUntraced(function*(companyId: number, channelId: number) {
        const actor = yield* CurrentActor
        const channel = yield* repo.channel(companyId, channelId)
        if (Option.isNone(channel) || !(yield* access.canSee(companyId, actor, channelId))) return yield* channelNotFound()
        return channel.value
      })

      const sip = (hasMsgrA: boolean): Eligibility => ({
        message: { window_open: false, window_expires_at: null, requires_template: false },
        call: {
          channel_kind: "sip",
          can_call: true,
          permission_status: "not_required",
          permission_expires_at: null,
          can_request_permission: false,
          request_cooldown_until: null,
          attempts_remaining: 0,
          has_msgr_a_account: hasMsgrA
        }
      })

      const compute = Effect.fnUntraced(function*(companyId: number, contact: ContactRow, channel: ChannelRef) {
        const now = yield* Clock.currentTimeMillis
        const types = yield* repo.accountTypes(companyId, contact.id)
        const hasMsgrA = types.has("msgr_a") || types.has("msgr_a_business")
        const inbound = yield* repo.lastInbound(companyId, contact.id, channel.id)
        const hours = channelRules[channel.type].customerWindowHours
        const open = windowClosed(channel.type, false, inbound.at, now) === null
        const message = {
          window_open: open,
          window_expires_at: hours !== null && inbound.at !== null ? seconds(inbound.at.getTime()) + hours * 3600 : null,
          requires_template: !open && channel.type === "msgr_a_business"
        }
        if (channel.type !== "msgr_a_business") {
          return {
            message,
            call: {
              channel_kind: channel.type,
              can_call: false,
              permission_status: "unavailable" as const,
              permission_expires_at: null,
              can_request_permission: false,
              request_cooldown_until: null,
              attempts_remaining: 0,
              has_msgr_a_account: hasMsgrA
            }
          }
        }
        const state = callState(yield* repo.permissionRequests(companyId, contact.id, channel.id, new Date(now - callPermission.validMs)), now)
        const reachable = types.has("msgr_a_business") && contact.blocked_at === null && channel.status === "connected"
        return {
          message,
          call: {
            channel_kind: channel.type,
            can_call: reachable && state.status === "granted",
            permission_status: state.status,
            permission_expires_at: state.expiresAt === null ? null : seconds(state.expiresAt),
            can_request_permission: reachable && state.status !== "granted" && state.attemptsRemaining > 0 && state.cooldownUntil === null,
            request_cooldown_until: state.cooldownUntil === null ? null : seconds(state.cooldownUntil),
            attempts_remaining: state.attemptsRemaining,
            has_msgr_a_account: hasMsgrA
          }
        }
      })

      const eligibility = Effect.fn("ContactEligibility.eligibility")(function*(id: number, channelId: number | "sip" | undefined) {
        const company = yield* telephonyRoute(`v1/contacts/${id}/outbound-eligibility`, "contact.view")
        const contact = yield* repo.exists(company.id, id)
        if (Option.isNone(contact)) return yield* contactNotFound()
        if (channelId === undefined || channelId === "sip") {
          const types = yield* repo.accountTypes(company.id, id)
          return sip(types.has("msgr_a") || types.has("msgr_a_business"))
        }
        const channel = yield* visibleChannel(company.id, channelId)
        return yield* compute(company.id, contact.value, channel)
      })

      const requestCallPermission = Effect.fn("ContactEligibility.requestCallPermission")(function*(id: number, channelId: number) {
        const company = yield* telephonyRoute(`v1/contacts/${id}/call-permission/request`, "conversation.create")
        const actor = yield* CurrentActor
        return yield* Effect.gen(function*() {
          // The contact row is the lock that keeps two requests from both passing the limits.
          const contact = yield* repo.exists(company.id, id, true)
          if (Option.isNone(contact)) return yield* contactNotFound()
          const channel = yield* visibleChannel(company.id, channelId)
          if (channel.type !== "msgr_a_business") {
            return yield* ruleViolation("call_permission_not_required", `A ${channel.type} channel does not take call-permission requests.`)
          }
          const before = yield* compute(company.id, contact.value, channel)
          const call = before.call
          if (contact.value.blocked_at !== null) return yield* ruleViolation("contact_blocked", "This contact is blocked.")
          if (channel.status !== "connected") return yield* ruleViolation("channel_not_connected", "The channel is not connected.")
          if (!(yield* repo.accountTypes(company.id, id)).has("msgr_a_business")) {
            return yield* ruleViolation("no_msgr_a_business_account", "The contact has no msgr_a_business account to ask.")
          }
          if (call.permission_status === "granted") {
            return yield* ruleViolation("call_permission_granted", "The contact has already granted call permission.")
          }
          if (!call.can_request_permission) {
            const now = yield* Clock.currentTimeMillis
            const until = call.request_cooldown_until ?? seconds(now)
            yield* addResponseHeaders({ "retry-after": String(Math.max(1, until - seconds(now))) })
            return yield* new CallPermissionLimit({ data: { message: "Call-permission request limit reached.", eligibility: before } })
          }
          yield* repo.addPermissionRequest(company.id, id, channel.id, actor.userId, new Date(yield* Clock.currentTimeMillis))
          return yield* compute(company.id, contact.value, channel)
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", (e) => Effect.die(e)))
      })

      return ContactEligibility.of({ eligibility, requestCallPermission })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(ContactsRepo.layer))
}

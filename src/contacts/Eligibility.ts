import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId, CurrentActor, currentCompany, requirePermission } from "../auth/Domain.ts"
import { Credentials } from "../providers/Credentials.ts"
import { type CallPermissionReply, type ChannelContext, Providers } from "../providers/Provider.ts"
import { channelRules } from "../providers/Domain.ts"
import { Events } from "../events/Events.ts"
import { channelContext, windowClosed } from "../providers/Rules.ts"
import { BadGateway, type Forbidden, type NotFound, notFound, ruleViolation, type Unprocessable } from "../platform/Errors.ts"
import { addResponseHeaders } from "../platform/HttpKernel.ts"
import { ChannelAccess } from "../auth/ChannelAccess.ts"
import { contactNotFound } from "./Contacts.ts"
import { CallPermissionLimit, type Eligibility } from "./Domain.ts"
import { type ChannelRef, EligibilityRepo, type PermissionRequestRow } from "./EligibilityRepo.ts"
import { type ContactRow, ContactsRepo } from "./Repo.ts"

const hour = 3_600_000
const day = 24 * hour
/** The business messenger's call-permission rules: one request a day, two a week; a request or an answer lasts 7 days. */
export const callPermission = { perDay: 1, perWeek: 2, validMs: 7 * day } as const

/** The text above the provider's allow / deny buttons. */
export const callPermissionText = "We would like to call you on WhatsApp. Will you allow us to call you?"

const seconds = (ms: number) => Math.floor(ms / 1000)

const channelNotFound = () => notFound("Channel not found.")

export interface CallState {
  readonly status: Eligibility["call"]["permission_status"]
  /** Epoch ms; null when there is nothing to expire or the grant is permanent. */
  readonly expiresAt: number | null
  readonly attemptsRemaining: number
  readonly cooldownUntil: number | null
}

/** Until when a row's state holds; `Infinity` for a permanent grant. */
const validUntil = (row: PermissionRequestRow): number => {
  switch (row.status) {
    case "granted":
      if (row.permanent) return Number.POSITIVE_INFINITY
      return row.expires_at?.getTime() ?? (row.answered_at ?? row.requested_at).getTime() + callPermission.validMs
    case "rejected":
      return (row.answered_at ?? row.requested_at).getTime() + callPermission.validMs
    default:
      return row.requested_at.getTime() + callPermission.validMs
  }
}

/**
 * The permission as the newest event left it (a request, or the contact's answer, whichever came
 * last), and what the request limits allow now. Only requests count against the limits; `rows`
 * come newest request first.
 */
export const callState = (rows: ReadonlyArray<PermissionRequestRow>, now: number): CallState => {
  let latest: PermissionRequestRow | undefined
  let latestAt = Number.NEGATIVE_INFINITY
  for (const row of rows) {
    const at = (row.answered_at ?? row.requested_at).getTime()
    if (at > latestAt || (at === latestAt && latest !== undefined && row.id > latest.id)) {
      latest = row
      latestAt = at
    }
  }
  let status: CallState["status"] = "none"
  let expiresAt: number | null = null
  if (latest !== undefined) {
    const until = validUntil(latest)
    if (until > now) {
      status = latest.status === "sending" ? "pending" : latest.status
      expiresAt = Number.isFinite(until) ? until : null
    }
  }
  const recent = rows.filter((r) => r.origin === "request" && r.requested_at.getTime() > now - callPermission.validMs)
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

/** What a recorded answer left: the contact's permission on the channel. */
export interface CallPermissionRecorded {
  readonly contact_id: number
  readonly channel_id: number
  readonly permission_status: Eligibility["call"]["permission_status"]
  readonly permission_expires_at: number | null
}

/**
 * Outbound eligibility of a contact on one channel: the messaging window (the rule of the send
 * path) and whether a call can be placed. The company's SIP trunk needs no permission; the
 * business messenger (msgr_a_business) calls only with the contact's permission, asked for
 * through call-permission requests sent by the provider and answered by the contact through
 * the provider's webhook; the other messengers cannot carry calls.
 */
export class ContactEligibility extends Context.Service<ContactEligibility, {
  eligibility(id: number, channelId: number | "sip" | undefined): Effect.Effect<Eligibility, Forbidden | NotFound, CurrentActor>
  requestCallPermission(id: number, channelId: number): Effect.Effect<Eligibility, Forbidden | NotFound | Unprocessable | CallPermissionLimit | BadGateway, CurrentActor>
  /**
   * The contact's answer as the provider delivered it. None when the channel cannot call or no
   * live contact holds the sender's account; a redelivered answer changes nothing.
   */
  recordReply(channel: ChannelContext, reply: CallPermissionReply): Effect.Effect<Option.Option<CallPermissionRecorded>>
}>()("crm/contacts/ContactEligibility") {
  static readonly layerNoDeps = Layer.effect(
    ContactEligibility,
    Effect.gen(function*() {
      const contacts = yield* ContactsRepo
      const repo = yield* EligibilityRepo
      const access = yield* ChannelAccess
      const sql = yield* SqlClient.SqlClient
      const credentials = yield* Credentials
      const providers = yield* Providers
      const events = yield* Events

      /** Both routes exist only for companies with telephony: elsewhere they answer as unknown routes. */
      const telephonyRoute = Effect.fnUntraced(function*(path: string, permission: string) {
        const company = yield* currentCompany
        if (!(yield* repo.telephonyEnabled(company.id))) return yield* notFound(`The route ${path} could not be found.`)
        return yield* requirePermission(permission)
      })

      const visibleChannel = Effect.fnUntraced(function*(companyId: CompanyId, channelId: number) {
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

      const stateOf = Effect.fnUntraced(function*(companyId: CompanyId, contactId: number, channelId: number) {
        const now = yield* Clock.currentTimeMillis
        return callState(yield* repo.permissionRequests(companyId, contactId, channelId, new Date(now - callPermission.validMs)), now)
      })

      const compute = Effect.fnUntraced(function*(companyId: CompanyId, contact: ContactRow, channel: ChannelRef) {
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
        if (!channelRules[channel.type].callPermission) {
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
        const state = yield* stateOf(companyId, contact.id, channel.id)
        const reachable = types.has(channel.type) && contact.blocked_at === null && channel.status === "connected"
        return {
          message,
          call: {
            channel_kind: channel.type,
            can_call: reachable && state.status === "granted",
            permission_status: state.status,
            permission_expires_at: state.expiresAt === null ? null : seconds(state.expiresAt),
            // The request is a free-form message, so it needs the customer-service window.
            can_request_permission: reachable && open && state.status !== "granted" && state.attemptsRemaining > 0 &&
              state.cooldownUntil === null,
            request_cooldown_until: state.cooldownUntil === null ? null : seconds(state.cooldownUntil),
            attempts_remaining: state.attemptsRemaining,
            has_msgr_a_account: hasMsgrA
          }
        }
      })

      const stateChanged = (
        companyId: CompanyId,
        contactId: number,
        channelId: number,
        before: CallState,
        after: CallState,
        source: "request" | "reply",
        extra: Record<string, unknown>
      ) =>
        before.status === after.status && before.expiresAt === after.expiresAt
          ? Effect.void
          : Effect.asVoid(events.emit(companyId, "contact.call_permission.updated", {
            contact_id: contactId,
            channel_id: channelId,
            permission_status: after.status,
            permission_expires_at: after.expiresAt === null ? null : seconds(after.expiresAt),
            previous_status: before.status,
            source,
            ...extra
          }))

      const eligibility = Effect.fn("ContactEligibility.eligibility")(function*(id: number, channelId: number | "sip" | undefined) {
        const company = yield* telephonyRoute(`v1/contacts/${id}/outbound-eligibility`, "contact.view")
        const contact = yield* contacts.exists(company.id, id)
        if (Option.isNone(contact)) return yield* contactNotFound()
        if (channelId === undefined || channelId === "sip") {
          const types = yield* repo.accountTypes(company.id, id)
          return sip(types.has("msgr_a") || types.has("msgr_a_business"))
        }
        const channel = yield* visibleChannel(company.id, channelId)
        return yield* compute(company.id, contact.value, channel)
      })

      /**
       * Checks and reserves the attempt in one transaction (the contact row is the lock that keeps
       * two requests from both passing the limits), asks the provider outside it, then confirms
       * the attempt or, when the provider refused, drops it: a refused request never counts.
       */
      const requestCallPermission = Effect.fn("ContactEligibility.requestCallPermission")(function*(id: number, channelId: number) {
        const company = yield* telephonyRoute(`v1/contacts/${id}/call-permission/request`, "conversation.create")
        const actor = yield* CurrentActor
        const reserved = yield* Effect.gen(function*() {
          const contact = yield* contacts.exists(company.id, id, true)
          if (Option.isNone(contact)) return yield* contactNotFound()
          const channel = yield* visibleChannel(company.id, channelId)
          if (!channelRules[channel.type].callPermission) {
            return yield* ruleViolation("call_permission_not_required", `A ${channel.type} channel does not take call-permission requests.`)
          }
          const before = yield* compute(company.id, contact.value, channel)
          const call = before.call
          if (contact.value.blocked_at !== null) return yield* ruleViolation("contact_blocked", "This contact is blocked.")
          if (channel.status !== "connected") return yield* ruleViolation("channel_not_connected", "The channel is not connected.")
          if (!(yield* repo.accountTypes(company.id, id)).has(channel.type)) {
            return yield* ruleViolation("no_msgr_a_business_account", "The contact has no msgr_a_business account to ask.")
          }
          if (call.permission_status === "granted") {
            return yield* ruleViolation("call_permission_granted", "The contact has already granted call permission.")
          }
          const recipient = yield* repo.callRecipient(company.id, id, channel.id)
          if (!before.message.window_open || Option.isNone(recipient)) {
            return yield* ruleViolation(
              "wa_window_closed",
              "The contact has not written on this channel within 24 hours; a call-permission request can be sent only inside that window."
            )
          }
          if (!call.can_request_permission) {
            const now = yield* Clock.currentTimeMillis
            const until = call.request_cooldown_until ?? seconds(now)
            yield* addResponseHeaders({ "retry-after": String(Math.max(1, until - seconds(now))) })
            return yield* new CallPermissionLimit({ data: { message: "Call-permission request limit reached.", eligibility: before } })
          }
          const previous = yield* stateOf(company.id, id, channel.id)
          const requestId = yield* repo.reservePermissionRequest(company.id, id, channel.id, actor.userId, new Date(yield* Clock.currentTimeMillis))
          return { channel, recipient: recipient.value, requestId, previous }
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", (e) => Effect.die(e)))

        const { channel, recipient, requestId, previous } = reserved
        const context = channelContext(credentials, company.id, channel)
        // Once the provider is asked the outcome must be written down, whatever the client does meanwhile.
        return yield* Effect.uninterruptible(Effect.gen(function*() {
          const sent = yield* Effect.result(providers.forChannel(context).requestCallPermission(context, recipient, callPermissionText))
          if (sent._tag === "Failure") {
            yield* repo.dropPermissionRequest(company.id, requestId)
            const e = sent.failure
            if (e.code === "not_reachable_24h") return yield* ruleViolation("wa_window_closed", e.message)
            return yield* new BadGateway({ message: `The messaging provider refused the call-permission request (${e.code}): ${e.message}` })
          }
          const after = yield* Effect.gen(function*() {
            const contact = yield* contacts.exists(company.id, id, true)
            // The request went out, so it is recorded even when the contact was deleted or merged meanwhile.
            yield* repo.confirmPermissionRequest(company.id, requestId, sent.success.externalMessageId)
            if (Option.isNone(contact)) return Option.none()
            yield* stateChanged(company.id, id, channel.id, previous, yield* stateOf(company.id, id, channel.id), "request", {
              requested_by_user_id: actor.userId
            })
            return Option.some(yield* compute(company.id, contact.value, channel))
          }).pipe(sql.withTransaction, Effect.orDie)
          if (Option.isNone(after)) return yield* contactNotFound()
          return after.value
        }))
      })

      const recordReply = Effect.fn("ContactEligibility.recordReply")(function*(channel: ChannelContext, reply: CallPermissionReply) {
        if (!channelRules[channel.type].callPermission) return Option.none()
        const companyId = CompanyId.make(channel.companyId)
        return yield* Effect.gen(function*() {
          const contactId = yield* repo.accountContact(companyId, channel.type, reply.from)
          if (Option.isNone(contactId)) return Option.none()
          const contact = yield* contacts.exists(companyId, contactId.value, true)
          if (Option.isNone(contact)) return Option.none()
          const id = contact.value.id
          const now = yield* Clock.currentTimeMillis
          const before = yield* stateOf(companyId, id, channel.id)
          const recorded = (state: CallState): Option.Option<CallPermissionRecorded> =>
            Option.some({
              contact_id: id,
              channel_id: channel.id,
              permission_status: state.status,
              permission_expires_at: state.expiresAt === null ? null : seconds(state.expiresAt)
            })
          if (reply.externalMessageId !== null && (yield* repo.answerSeen(companyId, channel.id, reply.externalMessageId))) {
            return recorded(before)
          }
          // Answers are ordered as they arrive (under the contact lock), not by the provider's
          // timestamps: those have whole seconds and would tie with the request they answer.
          const answeredAt = now
          const accepted = reply.response === "accept"
          const answer = {
            status: accepted ? "granted" as const : "rejected" as const,
            answeredAt: new Date(answeredAt),
            expiresAt: accepted && !reply.permanent
              ? reply.expiresAt ?? new Date(answeredAt + callPermission.validMs)
              : null,
            permanent: accepted && reply.permanent,
            answerMessageId: reply.externalMessageId
          }
          const since = new Date(now - callPermission.validMs)
          const request = yield* repo.requestForAnswer(companyId, id, channel.id, reply.requestMessageId, since)
          if (Option.isSome(request)) yield* repo.answerPermissionRequest(companyId, request.value, answer)
          else yield* repo.addPermissionAnswer(companyId, id, channel.id, answer)
          const after = yield* stateOf(companyId, id, channel.id)
          yield* stateChanged(companyId, id, channel.id, before, after, "reply", {
            response: reply.response,
            permanent: answer.permanent,
            response_source: reply.source
          })
          return recorded(after)
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      return ContactEligibility.of({ eligibility, requestCallPermission, recordReply })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([ContactsRepo.layer, EligibilityRepo.layer]))
}

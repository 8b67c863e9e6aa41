import { Context, Effect, Layer, Option } from "effect"
import type { CompanyId } from "../auth/Domain.ts"
import { SqlClient } from "effect/sql"
import type { ChannelType } from "../providers/Domain.ts"
import type { ChannelRef } from "../providers/Rules.ts"

export type { ChannelRef }

/**
 * A call-permission request (`origin: request`; `sending` while the provider call is under way)
 * or an answer nobody asked for (`origin: reply`, `requested_at` = the answer's time).
 */
export interface PermissionRequestRow {
  readonly id: number
  readonly status: "sending" | "pending" | "granted" | "rejected"
  readonly origin: "request" | "reply"
  readonly permanent: boolean
  readonly requested_at: Date
  readonly answered_at: Date | null
  readonly expires_at: Date | null
}

export interface PermissionAnswer {
  readonly status: "granted" | "rejected"
  readonly answeredAt: Date
  readonly expiresAt: Date | null
  readonly permanent: boolean
  readonly answerMessageId: string | null
}

/** What outbound eligibility and call permissions read and write; every statement carries the company id. */
export class EligibilityRepo extends Context.Service<EligibilityRepo, {
  telephonyEnabled(companyId: CompanyId): Effect.Effect<boolean>
  channel(companyId: CompanyId, channelId: number): Effect.Effect<Option.Option<ChannelRef>>
  lastInbound(companyId: CompanyId, contactId: number, channelId: number): Effect.Effect<{ readonly threads: number; readonly at: Date | null }>
  accountTypes(companyId: CompanyId, contactId: number): Effect.Effect<ReadonlySet<string>>
  /** Requests made or answered since `since`, and grants still running; newest request first. */
  permissionRequests(companyId: CompanyId, contactId: number, channelId: number, since: Date): Effect.Effect<ReadonlyArray<PermissionRequestRow>>
  /** A `sending` request: it counts against the limits while the provider is asked. */
  reservePermissionRequest(companyId: CompanyId, contactId: number, channelId: number, userId: number | null, at: Date): Effect.Effect<number>
  /** The provider took the request: `pending` (unless an answer already arrived), with the provider's message id. */
  confirmPermissionRequest(companyId: CompanyId, id: number, externalMessageId: string): Effect.Effect<void>
  /** The provider refused the request: it did not happen. */
  dropPermissionRequest(companyId: CompanyId, id: number): Effect.Effect<void>
  /** Where a message to the contact on the channel goes: its one-to-one thread that heard from it last. */
  callRecipient(companyId: CompanyId, contactId: number, channelId: number): Effect.Effect<Option.Option<string>>
  /** The live contact holding the provider account `externalId` of this channel type. */
  accountContact(companyId: CompanyId, channelType: ChannelType, externalId: string): Effect.Effect<Option.Option<number>>
  answerSeen(companyId: CompanyId, channelId: number, answerMessageId: string): Effect.Effect<boolean>
  /** The request an answer belongs to: the one with the provider message id it names, else the newest still open since `since`. */
  requestForAnswer(companyId: CompanyId, contactId: number, channelId: number, requestMessageId: string | null, since: Date): Effect.Effect<Option.Option<number>>
  answerPermissionRequest(companyId: CompanyId, id: number, answer: PermissionAnswer): Effect.Effect<void>
  addPermissionAnswer(companyId: CompanyId, contactId: number, channelId: number, answer: PermissionAnswer): Effect.Effect<void>
}>()("crm/contacts/EligibilityRepo") {
  static readonly layer = Layer.effect(
    EligibilityRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      const telephonyEnabled = (companyId: CompanyId) =>
        sql<{ telephony_enabled: boolean }>`SELECT telephony_enabled FROM companies WHERE id = ${companyId}`.pipe(
          Effect.map((rows) => rows[0]?.telephony_enabled === true),
          Effect.orDie
        )

      const channel = (companyId: CompanyId, channelId: number) =>
        sql<ChannelRef>`
          SELECT id, type, provider, status, credentials, settings
          FROM channels WHERE company_id = ${companyId} AND id = ${channelId} AND deleted_at IS NULL`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const lastInbound = (companyId: CompanyId, contactId: number, channelId: number) =>
        sql<{ threads: number; at: Date | null }>`
          SELECT count(*)::int AS threads, max(t.last_inbound_at) AS at
          FROM threads t JOIN conversations cv ON cv.id = t.conversation_id AND cv.company_id = ${companyId}
          WHERE t.company_id = ${companyId} AND t.channel_id = ${channelId} AND cv.contact_id = ${contactId} AND NOT t.is_group`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const accountTypes = (companyId: CompanyId, contactId: number) =>
        sql<{ channel_type: string }>`
          SELECT DISTINCT channel_type FROM contact_accounts WHERE company_id = ${companyId} AND contact_id = ${contactId}`.pipe(
          Effect.map((rows) => new Set(rows.map((row) => row.channel_type))),
          Effect.orDie
        )

      const permissionRequests = (companyId: CompanyId, contactId: number, channelId: number, since: Date) =>
        sql<PermissionRequestRow>`
          SELECT id, status, origin, permanent, requested_at, answered_at, expires_at FROM call_permission_requests
          WHERE company_id = ${companyId} AND contact_id = ${contactId} AND channel_id = ${channelId}
            AND (requested_at > ${since} OR answered_at > ${since}
              OR (status = 'granted' AND (permanent OR expires_at > ${since})))
          ORDER BY requested_at DESC, id DESC`.pipe(Effect.orDie)

      const reservePermissionRequest = (companyId: CompanyId, contactId: number, channelId: number, userId: number | null, at: Date) =>
        sql<{ id: number }>`
          INSERT INTO call_permission_requests (company_id, contact_id, channel_id, status, requested_by_user_id, requested_at)
          VALUES (${companyId}, ${contactId}, ${channelId}, 'sending', ${userId}, ${at})
          RETURNING id`.pipe(Effect.map((rows) => rows[0].id), Effect.orDie)

      const confirmPermissionRequest = (companyId: CompanyId, id: number, externalMessageId: string) =>
        sql`
          UPDATE call_permission_requests
          SET status = CASE WHEN status = 'sending' THEN 'pending' ELSE status END, external_message_id = ${externalMessageId}
          WHERE company_id = ${companyId} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

      const dropPermissionRequest = (companyId: CompanyId, id: number) =>
        sql`DELETE FROM call_permission_requests WHERE company_id = ${companyId} AND id = ${id} AND status = 'sending'`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const callRecipient = (companyId: CompanyId, contactId: number, channelId: number) =>
        sql<{ recipient: string | null }>`
          SELECT COALESCE(a.external_id, t.external_thread_id) AS recipient
          FROM threads t
          JOIN conversations cv ON cv.id = t.conversation_id AND cv.company_id = ${companyId}
          LEFT JOIN contact_accounts a ON a.id = t.contact_account_id AND a.company_id = ${companyId}
          WHERE t.company_id = ${companyId} AND t.channel_id = ${channelId} AND cv.contact_id = ${contactId} AND NOT t.is_group
            AND COALESCE(a.external_id, t.external_thread_id) IS NOT NULL
          ORDER BY t.last_inbound_at DESC NULLS LAST, t.id DESC
          LIMIT 1`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0]?.recipient)), Effect.orDie)

      const accountContact = (companyId: CompanyId, channelType: ChannelType, externalId: string) =>
        sql<{ contact_id: number }>`
          SELECT a.contact_id FROM contact_accounts a
          JOIN contacts c ON c.id = a.contact_id AND c.company_id = ${companyId} AND c.deleted_at IS NULL
          WHERE a.company_id = ${companyId} AND a.channel_type = ${channelType} AND a.external_id = ${externalId}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0]?.contact_id)),
          Effect.orDie
        )

      const answerSeen = (companyId: CompanyId, channelId: number, answerMessageId: string) =>
        sql<{ n: number }>`
          SELECT count(*)::int AS n FROM call_permission_requests
          WHERE company_id = ${companyId} AND channel_id = ${channelId} AND answer_message_id = ${answerMessageId}`.pipe(
          Effect.map((rows) => rows[0].n > 0),
          Effect.orDie
        )

      const requestForAnswer = (companyId: CompanyId, contactId: number, channelId: number, requestMessageId: string | null, since: Date) =>
        sql<{ id: number }>`
          SELECT id FROM call_permission_requests
          WHERE company_id = ${companyId} AND contact_id = ${contactId} AND channel_id = ${channelId} AND origin = 'request'
            AND (${requestMessageId === null ? sql`false` : sql`external_message_id = ${requestMessageId}`}
              OR (status IN ('sending', 'pending') AND requested_at > ${since}))
          ORDER BY ${requestMessageId === null ? sql`` : sql`(external_message_id = ${requestMessageId}) DESC,`} requested_at DESC, id DESC
          LIMIT 1`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0]?.id)), Effect.orDie)

      const answerPermissionRequest = (companyId: CompanyId, id: number, answer: PermissionAnswer) =>
        sql`
          UPDATE call_permission_requests
          SET status = ${answer.status}, answered_at = ${answer.answeredAt}, expires_at = ${answer.expiresAt},
              permanent = ${answer.permanent}, answer_message_id = ${answer.answerMessageId}
          WHERE company_id = ${companyId} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

      const addPermissionAnswer = (companyId: CompanyId, contactId: number, channelId: number, answer: PermissionAnswer) =>
        sql`
          INSERT INTO call_permission_requests
            (company_id, contact_id, channel_id, status, origin, permanent, requested_at, answered_at, expires_at, answer_message_id)
          VALUES (${companyId}, ${contactId}, ${channelId}, ${answer.status}, 'reply', ${answer.permanent}, ${answer.answeredAt},
            ${answer.answeredAt}, ${answer.expiresAt}, ${answer.answerMessageId})`.pipe(Effect.asVoid, Effect.orDie)

      return EligibilityRepo.of({
        telephonyEnabled,
        channel,
        lastInbound,
        accountTypes,
        permissionRequests,
        reservePermissionRequest,
        confirmPermissionRequest,
        dropPermissionRequest,
        callRecipient,
        accountContact,
        answerSeen,
        requestForAnswer,
        answerPermissionRequest,
        addPermissionAnswer
      })
    })
  )
}

import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { idArray } from "../platform/Sql.ts"

interface DealStageRow {
  readonly id: number
  readonly funnel_stage_id: number
}

/**
 * Reads of other areas' rows that trigger conditions and actions need and no service of theirs
 * answers without a signed-in user: the contact behind an account, tags, the first message, a
 * deal's stage, channel types, an account to send on, assignment.
 */
export class AutomationContextRepo extends Context.Service<AutomationContextRepo, {
  channelTypes(companyId: CompanyId): Effect.Effect<ReadonlyMap<number, string>>
  /** The contacts of some contact accounts, by account (an account not the company's is absent). */
  contactsOfAccounts(companyId: CompanyId, accountIds: ReadonlyArray<number>): Effect.Effect<ReadonlyMap<number, number>>
  inboundCount(companyId: CompanyId, conversationId: number): Effect.Effect<number>
  tagIds(companyId: CompanyId, contactId: number): Effect.Effect<ReadonlySet<number>>
  contactField(companyId: CompanyId, contactId: number, field: string): Effect.Effect<string | null>
  dealStage(companyId: CompanyId, dealId: number | null, contactId: number | null): Effect.Effect<{ dealId: number; stageId: number } | null>
  /** The contact's account on a channel of `channelType` (or on `channelId`), with the channel to send on. */
  accountOn(companyId: CompanyId, contactId: number, target: { channelId?: number; channelType?: string }): Effect.Effect<Option.Option<{ channelId: number; accountId: number }>>
  /** Assigns the conversation to a member or a team of the company; false when either is not the company's. */
  assign(companyId: CompanyId, conversationId: number, to: { userId?: number | undefined; teamId?: number | undefined }): Effect.Effect<boolean>
}>()("crm/automations/AutomationContextRepo") {
  static readonly layer = Layer.effect(
    AutomationContextRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return AutomationContextRepo.of({
        channelTypes: (companyId) =>
          sql<{ id: number; type: string }>`SELECT id, type FROM channels WHERE company_id = ${companyId}`.pipe(
            Effect.map((rows) => new Map(rows.map((r) => [Number(r.id), r.type]))),
            Effect.orDie
          ),
        contactsOfAccounts: (companyId, accountIds) =>
          sql<{ id: number; contact_id: number }>`
            SELECT id, contact_id FROM contact_accounts WHERE company_id = ${companyId} AND id = ANY(${idArray(accountIds)}::bigint[])`.pipe(
            Effect.map((rows) => new Map(rows.map((r) => [Number(r.id), Number(r.contact_id)]))),
            Effect.orDie
          ),
        inboundCount: (companyId, conversationId) =>
          sql<{ n: number }>`
            SELECT count(*)::int AS n FROM (SELECT 1 FROM messages WHERE company_id = ${companyId} AND conversation_id = ${conversationId}
              AND direction = 'inbound' LIMIT 2) x`.pipe(Effect.map((rows) => rows[0].n), Effect.orDie),
        tagIds: (companyId, contactId) =>
          sql<{ tag_id: number }>`SELECT tag_id FROM contact_tags WHERE company_id = ${companyId} AND contact_id = ${contactId}`.pipe(
            Effect.map((rows) => new Set(rows.map((r) => Number(r.tag_id)))),
            Effect.orDie
          ),
        contactField: (companyId, contactId, field) => {
          const column = ({ firstName: "first_name", lastName: "last_name", displayName: "display_name", company: "company_name", status: "status" } as Record<string, string>)[field]
          if (column === undefined) return Effect.succeed(null)
          return sql<{ v: string | null }>`SELECT ${sql(column)}::text AS v FROM contacts WHERE company_id = ${companyId} AND id = ${contactId}`.pipe(
            Effect.map((rows) => rows[0]?.v ?? null),
            Effect.orDie
          )
        },
        dealStage: (companyId, dealId, contactId) =>
          (dealId !== null
            ? sql<DealStageRow>`
                SELECT id, funnel_stage_id FROM deals WHERE company_id = ${companyId} AND id = ${dealId} AND deleted_at IS NULL`
            : contactId === null
            ? Effect.succeed<ReadonlyArray<DealStageRow>>([])
            : sql<DealStageRow>`
                SELECT id, funnel_stage_id FROM deals WHERE company_id = ${companyId} AND contact_id = ${contactId}
                  AND deleted_at IS NULL AND status = 'open' ORDER BY id DESC LIMIT 1`).pipe(
            Effect.map((rows) => (rows[0] === undefined ? null : { dealId: Number(rows[0].id), stageId: Number(rows[0].funnel_stage_id) })),
            Effect.orDie
          ),
        accountOn: (companyId, contactId, target) =>
          sql<{ channel_id: number; account_id: number }>`
            SELECT ch.id AS channel_id, ca.id AS account_id
            FROM contact_accounts ca JOIN channels ch ON ch.company_id = ca.company_id AND ch.type = ca.channel_type
            WHERE ca.company_id = ${companyId} AND ca.contact_id = ${contactId}
              ${target.channelId !== undefined ? sql`AND ch.id = ${target.channelId}` : sql``}
              ${target.channelType !== undefined ? sql`AND ch.type = ${target.channelType}` : sql``}
            ORDER BY (ch.status = 'connected') DESC, ch.id LIMIT 1`.pipe(
            Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (r) => ({ channelId: Number(r.channel_id), accountId: Number(r.account_id) }))),
            Effect.orDie
          ),
        assign: (companyId, conversationId, to) =>
          sql<{ id: number }>`
            UPDATE conversations SET assigned_user_id = ${to.userId ?? null}, assigned_team_id = ${to.teamId ?? null}, updated_at = now()
            WHERE company_id = ${companyId} AND id = ${conversationId}
              AND (${to.userId ?? null}::bigint IS NULL OR EXISTS (
                SELECT 1 FROM memberships WHERE company_id = ${companyId} AND user_id = ${to.userId ?? null}))
              AND (${to.teamId ?? null}::bigint IS NULL OR EXISTS (
                SELECT 1 FROM teams WHERE company_id = ${companyId} AND id = ${to.teamId ?? null}))
            RETURNING id`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)
      })
    })
  )
}

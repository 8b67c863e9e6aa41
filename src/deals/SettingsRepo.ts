import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"

export interface SettingsRow {
  readonly auto_create_deal_enabled: boolean
  readonly default_funnel_id: number | null
  readonly default_deal_title_template: string | null
  readonly default_currency: string | null
}

export interface ConversationInfo {
  readonly contact_id: number
  readonly contact_name: string
}

/** Deal settings of a company, and what auto-creation reads about a conversation. */
export class SettingsRepo extends Context.Service<SettingsRepo, {
  find(companyId: CompanyId, options?: { readonly forUpdate?: boolean }): Effect.Effect<SettingsRow>
  save(companyId: CompanyId, row: Omit<SettingsRow, "default_currency">): Effect.Effect<void>
  setCurrency(companyId: CompanyId, currency: string | null): Effect.Effect<void>
  conversation(companyId: CompanyId, conversationId: number): Effect.Effect<Option.Option<ConversationInfo>>
  /** The named channel, else the channel of the conversation's newest thread. */
  channelName(companyId: CompanyId, conversationId: number, channelId: number | undefined): Effect.Effect<string>
  hasDeal(companyId: CompanyId, conversationId: number): Effect.Effect<boolean>
  /** Who is responsible for a deal nobody created by hand: the company's longest-standing admin. */
  firstAdmin(companyId: CompanyId): Effect.Effect<number | null>
}>()("crm/deals/SettingsRepo") {
  static readonly layer = Layer.effect(
    SettingsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      const find = (companyId: CompanyId, options?: { readonly forUpdate?: boolean }) =>
        Effect.gen(function*() {
          if (options?.forUpdate === true) {
            yield* sql`INSERT INTO deal_settings (company_id) VALUES (${companyId}) ON CONFLICT DO NOTHING`
            yield* sql`SELECT 1 FROM deal_settings WHERE company_id = ${companyId} FOR UPDATE`
          }
          const rows = yield* sql<SettingsRow>`
            SELECT coalesce(s.auto_create_deal_enabled, false) AS auto_create_deal_enabled, s.default_funnel_id,
              s.default_deal_title_template, c.default_currency
            FROM companies c LEFT JOIN deal_settings s ON s.company_id = c.id
            WHERE c.id = ${companyId}`
          return rows[0] ?? { auto_create_deal_enabled: false, default_funnel_id: null, default_deal_title_template: null, default_currency: null }
        }).pipe(Effect.orDie)

      const save = (companyId: CompanyId, row: Omit<SettingsRow, "default_currency">) =>
        sql`
          INSERT INTO deal_settings (company_id, auto_create_deal_enabled, default_funnel_id, default_deal_title_template, updated_at)
          VALUES (${companyId}, ${row.auto_create_deal_enabled}, ${row.default_funnel_id}, ${row.default_deal_title_template}, now())
          ON CONFLICT (company_id) DO UPDATE SET
            auto_create_deal_enabled = excluded.auto_create_deal_enabled,
            default_funnel_id = excluded.default_funnel_id,
            default_deal_title_template = excluded.default_deal_title_template,
            updated_at = now()`.pipe(Effect.asVoid, Effect.orDie)

      const setCurrency = (companyId: CompanyId, currency: string | null) =>
        sql`UPDATE companies SET default_currency = ${currency}, updated_at = now() WHERE id = ${companyId}`.pipe(Effect.asVoid, Effect.orDie)

      const conversation = (companyId: CompanyId, conversationId: number) =>
        sql<ConversationInfo>`
          SELECT c.id AS contact_id,
            coalesce(nullif(c.display_name, ''), nullif(trim(concat_ws(' ', c.first_name, c.last_name)), ''), 'Contact #' || c.id) AS contact_name
          FROM conversations v JOIN contacts c ON c.id = v.contact_id AND c.company_id = ${companyId}
          WHERE v.company_id = ${companyId} AND v.id = ${conversationId}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const channelName = (companyId: CompanyId, conversationId: number, channelId: number | undefined) =>
        (channelId !== undefined
          ? sql<{ name: string }>`SELECT name FROM channels WHERE company_id = ${companyId} AND id = ${channelId}`
          : sql<{ name: string }>`
              SELECT ch.name FROM threads t JOIN channels ch ON ch.id = t.channel_id
              WHERE t.company_id = ${companyId} AND t.conversation_id = ${conversationId}
              ORDER BY t.id DESC LIMIT 1`).pipe(Effect.map((rows) => rows[0]?.name ?? ""), Effect.orDie)

      const hasDeal = (companyId: CompanyId, conversationId: number) =>
        sql`SELECT 1 FROM deals WHERE company_id = ${companyId} AND conversation_id = ${conversationId}`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const firstAdmin = (companyId: CompanyId) =>
        sql<{ user_id: number }>`
          SELECT m.user_id FROM memberships m JOIN users u ON u.id = m.user_id
          WHERE m.company_id = ${companyId} AND m.role = 'admin'
          ORDER BY u.is_service_account, m.created_at, m.user_id LIMIT 1`.pipe(
          Effect.map((rows) => rows[0]?.user_id ?? null),
          Effect.orDie
        )

      return SettingsRepo.of({ find, save, setCurrency, conversation, channelName, hasDeal, firstAdmin })
    })
  )
}

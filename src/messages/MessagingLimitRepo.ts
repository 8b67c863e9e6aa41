import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import type { ChannelType } from "../providers/Domain.ts"
import { idArray } from "../platform/Sql.ts"

export interface LimitedChannel {
  readonly type: ChannelType
  readonly settings: Record<string, unknown>
}

/** The contacts a channel counted against its messaging limit (`messaging_limit_contacts`), by company. */
export class MessagingLimitRepo extends Context.Service<MessagingLimitRepo, {
  /** A live channel of the company; `lock` holds it (NO KEY UPDATE) until the transaction ends. */
  channel(companyId: CompanyId, channelId: number, lock: boolean): Effect.Effect<Option.Option<LimitedChannel>>
  /** How many accounts the channel counted after `since`. */
  contacted(companyId: CompanyId, channelId: number, since: Date): Effect.Effect<number>
  /**
   * Of `accountIds`, those whose thread on the channel had no inbound message after `windowSince`
   * (or that have no thread) and that the channel has not counted after `countedSince`.
   */
  uncounted(companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>, windowSince: Date, countedSince: Date): Effect.Effect<ReadonlyArray<number>>
  /** Counts the accounts from `at`, except those already counted after `countedSince`. */
  record(companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>, at: Date, countedSince: Date): Effect.Effect<void>
}>()("crm/messages/MessagingLimitRepo") {
  static readonly layer = Layer.effect(
    MessagingLimitRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient

      const channel = (companyId: CompanyId, channelId: number, lock: boolean) =>
        sql<LimitedChannel>`
          SELECT type, settings FROM channels WHERE company_id = ${companyId} AND id = ${channelId} AND deleted_at IS NULL
          ${lock ? sql`FOR NO KEY UPDATE` : sql``}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const contacted = (companyId: CompanyId, channelId: number, since: Date) =>
        sql<{ count: number }>`
          SELECT count(*)::int AS count FROM messaging_limit_contacts
          WHERE company_id = ${companyId} AND channel_id = ${channelId} AND contacted_at > ${since}`.pipe(
          Effect.map((rows) => rows[0].count),
          Effect.orDie
        )

      // Threads are checked for the company apart from the key, as `BatchRepo` explains.
      const uncounted = (companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>, windowSince: Date, countedSince: Date) =>
        accountIds.length === 0 ? Effect.succeed([]) : sql<{ id: number }>`
          SELECT a.id FROM unnest(${idArray(accountIds)}::bigint[]) AS a(id)
          WHERE NOT EXISTS (
              SELECT 1 FROM threads t
              WHERE t.channel_id = ${channelId} AND t.contact_account_id = a.id AND NOT t.is_group
                AND t.company_id IS NOT DISTINCT FROM ${companyId}::bigint AND t.last_inbound_at > ${windowSince})
            AND NOT EXISTS (
              SELECT 1 FROM messaging_limit_contacts m
              WHERE m.company_id = ${companyId} AND m.channel_id = ${channelId} AND m.contact_account_id = a.id AND m.contacted_at > ${countedSince})`
          .unprepared.pipe(Effect.map((rows) => rows.map((row) => Number(row.id))), Effect.orDie)

      const record = (companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>, at: Date, countedSince: Date) =>
        accountIds.length === 0 ? Effect.void : sql`
          INSERT INTO messaging_limit_contacts AS m (company_id, channel_id, contact_account_id, contacted_at)
          SELECT DISTINCT ${companyId}::bigint, ${channelId}::bigint, a.id, ${at}::timestamptz FROM unnest(${idArray(accountIds)}::bigint[]) AS a(id)
          ON CONFLICT (company_id, channel_id, contact_account_id)
            DO UPDATE SET contacted_at = EXCLUDED.contacted_at WHERE m.contacted_at <= ${countedSince}`.pipe(Effect.asVoid, Effect.orDie)

      return MessagingLimitRepo.of({ channel, contacted, uncounted, record })
    })
  )
}

import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { windowOpenSince } from "../providers/Rules.ts"
import { type LimitedChannel, MessagingLimitRepo } from "./MessagingLimitRepo.ts"

/** The messaging limit's period: unique customers contacted outside the window per rolling 24 hours. */
export const limitPeriodMs = 24 * 3_600_000

/** The channel's messaging limit (`settings.messaging_limit`): a positive whole number, else none (unlimited). */
export const limitOf = (settings: Record<string, unknown>): number | null => {
  const value = settings.messaging_limit
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : null
}

/** What the limit leaves after the customers counted in the last 24 hours. */
export const remainingOf = (limit: number, contacted: number) => Math.max(0, limit - contacted)

/**
 * Splits the customers about to be contacted outside the window and not counted yet (account ids, in
 * sending order) at what the limit leaves: the first are admitted (and counted), the rest are beyond.
 */
export const allot = (limit: number, contacted: number, candidates: ReadonlyArray<number>) => {
  const unique = [...new Set(candidates)]
  const left = remainingOf(limit, contacted)
  return { admitted: unique.slice(0, left), beyond: unique.slice(left) }
}

/** A channel's limit as the audience estimate shows it: `candidates` would count, `beyond` of them would not fit. */
export const outlookOf = (channelId: number, limit: number, contacted: number, candidates: number) => {
  const remaining = remainingOf(limit, contacted)
  return { channel_id: channelId, limit, contacted_last_24h: contacted, remaining, beyond: Math.max(0, candidates - remaining) }
}
export type Outlook = ReturnType<typeof outlookOf>

const none: ReadonlySet<number> = new Set()

/**
 * The WhatsApp messaging limit of a channel (`settings.messaging_limit`), kept for the cluster in
 * `messaging_limit_contacts`. A customer counts when contacted outside the customer-service window
 * (the window of the sending rules) and not already counted in the last 24 hours.
 */
export class MessagingLimit extends Context.Service<MessagingLimit, {
  /**
   * Counts the accounts the channel is about to contact, as far as its limit goes, and answers those
   * beyond it. One transaction holding the channel row, so runners reserving at once never admit more
   * than the limit together. Accounts inside the window or already counted pass without counting.
   */
  reserve(companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>): Effect.Effect<ReadonlySet<number>>
  /** Counts a send made outside the window without asking the limit (a single template send is not refused). */
  record(companyId: CompanyId, channelId: number, accountId: number): Effect.Effect<void>
  /** The channel's limit against the accounts a broadcast would reach now; none when the channel has no limit. */
  outlook(companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>): Effect.Effect<Option.Option<Outlook>>
}>()("crm/messages/MessagingLimit") {
  static readonly layerNoDeps = Layer.effect(
    MessagingLimit,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* MessagingLimitRepo
      const countedSince = (nowMs: number) => new Date(nowMs - limitPeriodMs)

      /** The accounts that would count now, in the order given. */
      const uncounted = Effect.fnUntraced(function*(companyId: CompanyId, channelId: number, channel: LimitedChannel, accountIds: ReadonlyArray<number>, nowMs: number) {
        const since = windowOpenSince(channel.type, false, nowMs)
        if (since === null) return []
        const found = new Set(yield* repo.uncounted(companyId, channelId, accountIds, new Date(since), countedSince(nowMs)))
        return accountIds.filter((id) => found.has(id))
      })

      const reserveLocked = Effect.fnUntraced(function*(companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>) {
        const channel = yield* repo.channel(companyId, channelId, true)
        const limit = Option.isSome(channel) ? limitOf(channel.value.settings) : null
        if (Option.isNone(channel) || limit === null) return none
        const now = yield* Clock.currentTimeMillis
        const candidates = yield* uncounted(companyId, channelId, channel.value, accountIds, now)
        if (candidates.length === 0) return none
        const { admitted, beyond } = allot(limit, yield* repo.contacted(companyId, channelId, countedSince(now)), candidates)
        yield* repo.record(companyId, channelId, admitted, new Date(now), countedSince(now))
        return new Set(beyond)
      }, sql.withTransaction, Effect.orDie)

      const reserve = Effect.fn("MessagingLimit.reserve")(function*(companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>) {
        if (accountIds.length === 0) return none
        // Unlimited channels (most) take no lock: the lock is taken only where a limit is set.
        const channel = yield* repo.channel(companyId, channelId, false)
        if (Option.isNone(channel) || limitOf(channel.value.settings) === null) return none
        return yield* reserveLocked(companyId, channelId, accountIds)
      })

      const record = Effect.fn("MessagingLimit.record")(function*(companyId: CompanyId, channelId: number, accountId: number) {
        const now = yield* Clock.currentTimeMillis
        yield* repo.record(companyId, channelId, [accountId], new Date(now), countedSince(now))
      })

      const outlook = Effect.fn("MessagingLimit.outlook")(function*(companyId: CompanyId, channelId: number, accountIds: ReadonlyArray<number>) {
        const channel = yield* repo.channel(companyId, channelId, false)
        const limit = Option.isSome(channel) ? limitOf(channel.value.settings) : null
        if (Option.isNone(channel) || limit === null) return Option.none()
        const now = yield* Clock.currentTimeMillis
        const candidates = yield* uncounted(companyId, channelId, channel.value, accountIds, now)
        const contacted = yield* repo.contacted(companyId, channelId, countedSince(now))
        return Option.some(outlookOf(channelId, limit, contacted, new Set(candidates).size))
      })

      return MessagingLimit.of({ reserve, record, outlook })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(MessagingLimitRepo.layer))
}

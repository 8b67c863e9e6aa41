import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { Actor } from "./Domain.ts"

/** `"all"`, or the ids of the channels the actor may see in the company. */
export type VisibleChannels = "all" | ReadonlySet<number>

export class ChannelAccess extends Context.Service<ChannelAccess, {
  /**
   * Admins, managers and service accounts see every channel; an agent sees the
   * channels of the teams they belong to (a team in a mode other than `custom`
   * grants all channels), and none when they are in no team.
   */
  visible(companyId: number, actor: Actor): Effect.Effect<VisibleChannels>
  canSee(companyId: number, actor: Actor, channelId: number): Effect.Effect<boolean>
}>()("crm/teams/ChannelAccess") {
  static readonly layer = Layer.effect(
    ChannelAccess,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const visible = Effect.fnUntraced(function*(companyId: number, actor: Actor) {
        if (actor.isServiceAccount || actor.company === null || actor.company.role !== "agent") return "all" as const
        const rows = yield* sql<{ readonly mode: string; readonly channel_id: number | null }>`
          SELECT t.channel_access_mode AS mode, tc.channel_id
          FROM team_members tm
          JOIN teams t ON t.id = tm.team_id AND t.company_id = ${companyId}
          LEFT JOIN team_channels tc ON tc.team_id = t.id AND tc.company_id = ${companyId}
          WHERE tm.company_id = ${companyId} AND tm.user_id = ${actor.userId}`.pipe(Effect.orDie)
        if (rows.some((row) => row.mode !== "custom")) return "all" as const
        return new Set(rows.flatMap((row) => (row.channel_id === null ? [] : [row.channel_id])))
      })
      const canSee = (companyId: number, actor: Actor, channelId: number) =>
        Effect.map(visible(companyId, actor), (v) => v === "all" || v.has(channelId))
      return ChannelAccess.of({ visible, canSee })
    })
  )
}

import type { CompanyId } from "../auth/Domain.ts"
import { Array as Arr, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { Team } from "./Domain.ts"

interface TeamRow {
  readonly id: number
  readonly company_id: CompanyId
  readonly name: string
  readonly description: string
  readonly channel_access_mode: string
  readonly created_at: Date
  readonly updated_at: Date
}

export interface TeamFields {
  readonly name: string
  readonly description: string
  readonly channel_access_mode: string
}

const group = (rows: ReadonlyArray<{ readonly team_id: number; readonly id: number }>) => {
  const byTeam = new Map<number, Array<number>>()
  for (const row of rows) {
    const ids = byTeam.get(row.team_id)
    if (ids === undefined) byTeam.set(row.team_id, [row.id])
    else ids.push(row.id)
  }
  return byTeam
}

/** Teams of one company; every statement carries the company id. */
export class TeamsRepo extends Context.Service<TeamsRepo, {
  list(companyId: CompanyId): Effect.Effect<ReadonlyArray<Team>>
  find(companyId: CompanyId, teamId: number): Effect.Effect<Option.Option<Team>>
  insert(companyId: CompanyId, fields: TeamFields): Effect.Effect<number>
  /** False when the team is not the company's. */
  update(companyId: CompanyId, teamId: number, patch: Partial<TeamFields>): Effect.Effect<boolean>
  replaceChannels(companyId: CompanyId, teamId: number, channelIds: ReadonlyArray<number>): Effect.Effect<void>
  replaceMembers(companyId: CompanyId, teamId: number, userIds: ReadonlyArray<number>): Effect.Effect<void>
  delete(companyId: CompanyId, teamId: number): Effect.Effect<boolean>
  /** The given ids that are live (not deleted) channels of the company. */
  channelsOf(companyId: CompanyId, channelIds: ReadonlyArray<number>): Effect.Effect<ReadonlySet<number>>
  /** The given ids that are real (non-service) users holding a membership in the company. */
  membersOf(companyId: CompanyId, userIds: ReadonlyArray<number>): Effect.Effect<ReadonlySet<number>>
}>()("crm/teams/TeamsRepo") {
  static readonly layer = Layer.effect(
    TeamsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, company_id, name, description, channel_access_mode, created_at, updated_at`

      // A channel deleted later, or a member whose membership was revoked, drops out of the view.
      const assemble = (companyId: CompanyId, rows: ReadonlyArray<TeamRow>) =>
        Effect.gen(function*() {
          if (rows.length === 0) return []
          const teamIds = rows.map((row) => row.id)
          const channels = yield* sql<{ team_id: number; id: number }>`
            SELECT tc.team_id, tc.channel_id AS id FROM team_channels tc
            JOIN channels c ON c.id = tc.channel_id AND c.company_id = ${companyId} AND c.deleted_at IS NULL
            WHERE tc.company_id = ${companyId} AND ${sql.in("tc.team_id", teamIds)}
            ORDER BY tc.channel_id`
          const members = yield* sql<{ team_id: number; id: number }>`
            SELECT tm.team_id, tm.user_id AS id FROM team_members tm
            JOIN memberships m ON m.company_id = ${companyId} AND m.user_id = tm.user_id
            WHERE tm.company_id = ${companyId} AND ${sql.in("tm.team_id", teamIds)}
            ORDER BY tm.user_id`
          const channelIds = group(channels)
          const memberIds = group(members)
          return rows.map((row): Team => ({
            id: row.id,
            company_id: row.company_id,
            name: row.name,
            description: row.description,
            channel_access: { mode: row.channel_access_mode, channel_ids: channelIds.get(row.id) ?? [] },
            member_ids: memberIds.get(row.id) ?? [],
            created_at: row.created_at.toISOString(),
            updated_at: row.updated_at.toISOString()
          }))
        })

      const list = (companyId: CompanyId) =>
        sql<TeamRow>`SELECT ${columns} FROM teams WHERE company_id = ${companyId} ORDER BY id`.pipe(
          Effect.flatMap((rows) => assemble(companyId, rows)),
          Effect.orDie
        )

      const find = (companyId: CompanyId, teamId: number) =>
        sql<TeamRow>`SELECT ${columns} FROM teams WHERE company_id = ${companyId} AND id = ${teamId}`.pipe(
          Effect.flatMap((rows) => assemble(companyId, rows)),
          Effect.map((teams) => Option.fromNullishOr(teams[0])),
          Effect.orDie
        )

      const insert = (companyId: CompanyId, fields: TeamFields) =>
        sql<{ id: number }>`
          INSERT INTO teams ${sql.insert({ company_id: companyId, ...fields })} RETURNING id`.pipe(
          Effect.map((rows) => rows[0].id),
          Effect.orDie
        )

      const update = (companyId: CompanyId, teamId: number, patch: Partial<TeamFields>) =>
        sql<{ id: number }>`
          UPDATE teams SET ${sql.update({ ...patch, updated_at: new Date() })}
          WHERE company_id = ${companyId} AND id = ${teamId} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const replaceChannels = (companyId: CompanyId, teamId: number, channelIds: ReadonlyArray<number>) =>
        Effect.gen(function*() {
          yield* sql`DELETE FROM team_channels WHERE company_id = ${companyId} AND team_id = ${teamId}`
          const rows = channelIds.map((channel_id) => ({ company_id: companyId, team_id: teamId, channel_id }))
          if (Arr.isArrayNonEmpty(rows)) yield* sql`INSERT INTO team_channels ${sql.insert(rows)}`
        }).pipe(Effect.orDie)

      const replaceMembers = (companyId: CompanyId, teamId: number, userIds: ReadonlyArray<number>) =>
        Effect.gen(function*() {
          yield* sql`DELETE FROM team_members WHERE company_id = ${companyId} AND team_id = ${teamId}`
          const rows = userIds.map((user_id) => ({ company_id: companyId, team_id: teamId, user_id }))
          if (Arr.isArrayNonEmpty(rows)) yield* sql`INSERT INTO team_members ${sql.insert(rows)}`
        }).pipe(Effect.orDie)

      const remove = (companyId: CompanyId, teamId: number) =>
        sql<{ id: number }>`DELETE FROM teams WHERE company_id = ${companyId} AND id = ${teamId} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const channelsOf = (companyId: CompanyId, channelIds: ReadonlyArray<number>) =>
        channelIds.length === 0
          ? Effect.succeed(new Set<number>())
          : sql<{ id: number }>`
              SELECT id FROM channels
              WHERE company_id = ${companyId} AND deleted_at IS NULL AND ${sql.in("id", channelIds)}`.pipe(
              Effect.map((rows) => new Set(rows.map((row) => row.id))),
              Effect.orDie
            )

      const membersOf = (companyId: CompanyId, userIds: ReadonlyArray<number>) =>
        userIds.length === 0
          ? Effect.succeed(new Set<number>())
          : sql<{ id: number }>`
              SELECT u.id FROM memberships m JOIN users u ON u.id = m.user_id
              WHERE m.company_id = ${companyId} AND NOT u.is_service_account AND ${sql.in("m.user_id", userIds)}`.pipe(
              Effect.map((rows) => new Set(rows.map((row) => row.id))),
              Effect.orDie
            )

      return TeamsRepo.of({
        list,
        find,
        insert,
        update,
        replaceChannels,
        replaceMembers,
        delete: remove,
        channelsOf,
        membersOf
      })
    })
  )
}

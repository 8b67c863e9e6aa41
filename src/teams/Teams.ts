import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { type CompanyId, type CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { type Forbidden, invalidFields, type NotFound, notFound, type Unprocessable } from "../platform/Errors.ts"
import type { CreateTeam, Team, UpdateTeam } from "./Domain.ts"
import { TeamsRepo } from "./Repo.ts"

const teamNotFound = () => notFound("Team not found.")

const dedupe = (ids: ReadonlyArray<number>) => [...new Set(ids)]

/** 422 keyed by the position of each id that is not the company's: `channel_ids.1`, `member_ids.0`. */
const foreignIds = (checks: ReadonlyArray<{ field: string; ids: ReadonlyArray<number>; valid: ReadonlySet<number> }>) => {
  const errors: Record<string, Array<string>> = {}
  for (const { field, ids, valid } of checks) {
    ids.forEach((id, index) => {
      if (!valid.has(id)) errors[`${field}.${index}`] = [`The selected ${field}.${index} is invalid.`]
    })
  }
  return Object.keys(errors).length === 0 ? Option.none() : Option.some(invalidFields(errors))
}

export class Teams extends Context.Service<Teams, {
  readonly list: Effect.Effect<ReadonlyArray<Team>, Forbidden, CurrentActor>
  get(teamId: number): Effect.Effect<Team, Forbidden | NotFound, CurrentActor>
  create(input: CreateTeam): Effect.Effect<Team, Forbidden | Unprocessable, CurrentActor>
  update(teamId: number, input: UpdateTeam): Effect.Effect<Team, Forbidden | NotFound | Unprocessable, CurrentActor>
  delete(teamId: number): Effect.Effect<void, Forbidden | NotFound, CurrentActor>
}>()("crm/teams/Teams") {
  static readonly layerNoDeps = Layer.effect(
    Teams,
    Effect.gen(function*() {
      const repo = yield* TeamsRepo
      const events = yield* Events
      const sql = yield* SqlClient.SqlClient

      const validate = Effect.fnUntraced(function*(
        companyId: CompanyId,
        input: { readonly channel_ids?: ReadonlyArray<number> | undefined; readonly member_ids?: ReadonlyArray<number> | undefined }
      ) {
        const channelIds = input.channel_ids ?? []
        const memberIds = input.member_ids ?? []
        const channels = yield* repo.channelsOf(companyId, channelIds)
        const members = yield* repo.membersOf(companyId, memberIds)
        const failure = foreignIds([
          { field: "channel_ids", ids: channelIds, valid: channels },
          { field: "member_ids", ids: memberIds, valid: members }
        ])
        if (Option.isSome(failure)) return yield* failure.value
      })

      const list = Effect.gen(function*() {
        const company = yield* requirePermission("team.view")
        return yield* repo.list(company.id)
      }).pipe(Effect.withSpan("Teams.list"))

      const get = Effect.fn("Teams.get")(function*(teamId: number) {
        const company = yield* requirePermission("team.view")
        const team = yield* repo.find(company.id, teamId)
        if (Option.isNone(team)) return yield* teamNotFound()
        return team.value
      })

      const create = Effect.fn("Teams.create")(function*(input: CreateTeam) {
        const company = yield* requirePermission("team.create")
        yield* validate(company.id, input)
        return yield* Effect.gen(function*() {
          const teamId = yield* repo.insert(company.id, {
            name: input.name.trim(),
            description: input.description ?? "",
            channel_access_mode: input.channel_access_mode ?? "custom"
          })
          yield* repo.replaceChannels(company.id, teamId, dedupe(input.channel_ids ?? []))
          yield* repo.replaceMembers(company.id, teamId, dedupe(input.member_ids ?? []))
          const team = yield* Effect.flatMap(repo.find(company.id, teamId), Effect.fromOption)
          yield* events.emit(company.id, "team.created", team)
          return team
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      const update = Effect.fn("Teams.update")(function*(teamId: number, input: UpdateTeam) {
        const company = yield* requirePermission("team.update")
        if (Option.isNone(yield* repo.find(company.id, teamId))) return yield* teamNotFound()
        yield* validate(company.id, input)
        const updated = yield* Effect.gen(function*() {
          const patch = {
            ...(input.name !== undefined ? { name: input.name.trim() } : {}),
            ...(input.description !== undefined ? { description: input.description ?? "" } : {}),
            ...(input.channel_access_mode !== undefined ? { channel_access_mode: input.channel_access_mode } : {})
          }
          // Touches updated_at even when only the lists change.
          if (!(yield* repo.update(company.id, teamId, patch))) return Option.none()
          if (input.channel_ids !== undefined) yield* repo.replaceChannels(company.id, teamId, dedupe(input.channel_ids))
          if (input.member_ids !== undefined) yield* repo.replaceMembers(company.id, teamId, dedupe(input.member_ids))
          const team = yield* Effect.flatMap(repo.find(company.id, teamId), Effect.fromOption)
          yield* events.emit(company.id, "team.updated", team)
          return Option.some(team)
        }).pipe(sql.withTransaction, Effect.orDie)
        if (Option.isNone(updated)) return yield* teamNotFound()
        return updated.value
      })

      const remove = Effect.fn("Teams.delete")(function*(teamId: number) {
        const company = yield* requirePermission("team.delete")
        const deleted = yield* Effect.gen(function*() {
          const deleted = yield* repo.delete(company.id, teamId)
          if (deleted) yield* events.emit(company.id, "team.deleted", { id: teamId })
          return deleted
        }).pipe(sql.withTransaction, Effect.orDie)
        if (!deleted) return yield* teamNotFound()
      })

      return Teams.of({ list, get, create, update, delete: remove })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(TeamsRepo.layer))
}

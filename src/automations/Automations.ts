import { Clock, Context, Effect, Layer, Option, Stream } from "effect"
import type { Multipart } from "effect/http"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { CurrentActor, requirePermission, type CompanyId } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { Media } from "../media/Media.ts"
import { type Forbidden, invalidField, invalidFields, type NotFound, notFound, type Unprocessable } from "../platform/Errors.ts"
import { pageInfo } from "../platform/Pagination.ts"
import { actionGroups } from "./Actions.ts"
import {
  type Automation,
  type Bootstrap,
  type AutomationDetail,
  ConditionTypes,
  type CreateAutomation,
  type Graph,
  type Run,
  type RunDetail,
  Statuses,
  TriggerEvents,
  type UpdateAutomation
} from "./Domain.ts"
import { validate } from "./Graph.ts"
import { AutomationsRepo } from "./Repo.ts"

const automationNotFound = () => notFound("Automation not found.")
const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))
const isUuid = (id: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)

type Eff<A, E = never> = Effect.Effect<A, Forbidden | E, CurrentActor>

export class Automations extends Context.Service<Automations, {
  readonly bootstrap: Eff<typeof Bootstrap.Type>
  readonly list: Eff<ReadonlyArray<Automation>>
  get(id: string): Eff<AutomationDetail, NotFound>
  create(input: CreateAutomation): Eff<AutomationDetail, Unprocessable>
  update(id: string, input: UpdateAutomation): Eff<AutomationDetail, NotFound | Unprocessable>
  builder(id: string, graph: Graph): Eff<AutomationDetail, NotFound | Unprocessable>
  delete(id: string): Eff<void, NotFound>
  runs(id: string, page: number, perPage: number): Eff<{ items: ReadonlyArray<Run>; pagination: ReturnType<typeof pageInfo> }, NotFound>
  run(id: string, runId: string): Eff<RunDetail, NotFound>
  voice(parts: Stream.Stream<Multipart.Part, Multipart.MultipartError>): Eff<{
    media_id: number
    type: string
    mime_type: string
    size: number
    duration: number | null
    expires_at: string | null
  }, Unprocessable>
}>()("crm/automations/Automations") {
  static readonly layerNoDeps = Layer.effect(
    Automations,
    Effect.gen(function*() {
      const repo = yield* AutomationsRepo
      const events = yield* Events
      const media = yield* Media
      const sql = yield* SqlClient.SqlClient

      const detail = Effect.fnUntraced(function*(companyId: CompanyId, id: string) {
        const found = yield* repo.find(companyId, id, yield* nowDate)
        if (Option.isNone(found)) return yield* automationNotFound()
        const version = yield* repo.latestVersion(companyId, id)
        return {
          ...found.value,
          nodes: Option.match(version, { onNone: () => [], onSome: (v) => v.nodes }),
          edges: Option.match(version, { onNone: () => [], onSome: (v) => v.edges }),
          triggers: Option.match(version, { onNone: () => [], onSome: (v) => v.triggers })
        }
      })

      const announce = (companyId: CompanyId, key: string, id: string) => events.emit(companyId, key, { id })

      const list = Effect.gen(function*() {
        const company = yield* requirePermission("automation.view")
        return yield* repo.list(company.id, yield* nowDate)
      })

      const get = Effect.fn("Automations.get")(function*(id: string) {
        const company = yield* requirePermission("automation.view")
        if (!isUuid(id)) return yield* automationNotFound()
        return yield* detail(company.id, id)
      })

      const activationError = () =>
        invalidField("status", "An automation needs a saved graph with at least one trigger before it can be active.")

      const create = Effect.fn("Automations.create")(function*(input: CreateAutomation) {
        const company = yield* requirePermission("automation.create")
        const actor = yield* CurrentActor
        if (input.status === "active") return yield* activationError()
        const id = randomUUID()
        yield* Effect.gen(function*() {
          yield* repo.insert(company.id, { id, name: input.name.trim(), description: input.description ?? null, status: input.status ?? "draft", userId: actor.userId })
          yield* announce(company.id, "automation.created", id)
        }).pipe(sql.withTransaction, Effect.orDie)
        return yield* detail(company.id, id)
      })

      const update = Effect.fn("Automations.update")(function*(id: string, input: UpdateAutomation) {
        const company = yield* requirePermission("automation.update")
        const actor = yield* CurrentActor
        if (!isUuid(id)) return yield* automationNotFound()
        const current = yield* detail(company.id, id)
        if (input.status === "active" && current.triggers.length === 0) return yield* activationError()
        yield* Effect.gen(function*() {
          yield* repo.update(company.id, id, {
            ...(input.name !== undefined ? { name: input.name.trim() } : {}),
            ...(input.description !== undefined ? { description: input.description } : {}),
            ...(input.status !== undefined ? { status: input.status } : {})
          }, actor.userId)
          yield* announce(company.id, "automation.updated", id)
        }).pipe(sql.withTransaction, Effect.orDie)
        return yield* detail(company.id, id)
      })

      const builder = Effect.fn("Automations.builder")(function*(id: string, graph: Graph) {
        const company = yield* requirePermission("automation.update")
        const actor = yield* CurrentActor
        if (!isUuid(id)) return yield* automationNotFound()
        const current = yield* detail(company.id, id)
        const errors = validate(graph)
        if (current.status === "active" && (graph.triggers ?? []).length === 0) errors.triggers = ["An active automation needs at least one trigger."]
        if (Object.keys(errors).length > 0) return yield* invalidFields(errors)
        yield* Effect.gen(function*() {
          yield* repo.insertVersion(company.id, id, randomUUID(), { nodes: graph.nodes, edges: graph.edges ?? [], triggers: graph.triggers ?? [] }, actor.userId)
          yield* announce(company.id, "automation.updated", id)
        }).pipe(sql.withTransaction, Effect.orDie)
        return yield* detail(company.id, id)
      })

      const remove = Effect.fn("Automations.delete")(function*(id: string) {
        const company = yield* requirePermission("automation.delete")
        if (!isUuid(id)) return yield* automationNotFound()
        const deleted = yield* Effect.gen(function*() {
          const gone = yield* repo.delete(company.id, id)
          if (gone) yield* announce(company.id, "automation.deleted", id)
          return gone
        }).pipe(sql.withTransaction, Effect.orDie)
        if (!deleted) return yield* automationNotFound()
      })

      const runs = Effect.fn("Automations.runs")(function*(id: string, page: number, perPage: number) {
        const company = yield* requirePermission("automation.view")
        if (!isUuid(id)) return yield* automationNotFound()
        if (Option.isNone(yield* repo.find(company.id, id, yield* nowDate))) return yield* automationNotFound()
        const result = yield* repo.runs(company.id, id, page, perPage)
        return { items: result.items, pagination: pageInfo(page, perPage, result.total) }
      })

      const run = Effect.fn("Automations.run")(function*(id: string, runId: string) {
        const company = yield* requirePermission("automation.view")
        if (!isUuid(id) || !isUuid(runId)) return yield* notFound("Run not found.")
        const found = yield* repo.run(company.id, id, runId)
        if (Option.isNone(found)) return yield* notFound("Run not found.")
        return found.value
      })

      const bootstrap = Effect.gen(function*() {
        const company = yield* requirePermission("automation.view")
        const automations = yield* repo.list(company.id, yield* nowDate)
        const versions = yield* repo.versions(company.id)
        const recent = yield* repo.runs(company.id, null, 1, 20)
        const of = (automationId: string) => ({ automation_id: automationId })
        const triggers = versions.flatMap((v) => v.triggers.map((t) => ({ ...t, ...of(v.automation_id), version_id: v.id })))
        return {
          automations,
          versions: versions.map((v) => ({ id: v.id, automation_id: v.automation_id, number: v.number, created_at: v.created_at.toISOString() })),
          nodes: versions.flatMap((v) => v.nodes.map((n) => ({ ...n, ...of(v.automation_id), version_id: v.id }))),
          edges: versions.flatMap((v) => v.edges.map((e) => ({ ...e, ...of(v.automation_id), version_id: v.id }))),
          triggers,
          triggerConditions: triggers.flatMap((t) => (t.conditions ?? []).map((c, i) => ({ ...c, trigger_id: t.id, position: i, automation_id: t.automation_id }))),
          triggerChannelPivots: triggers.flatMap((t) => (t.channels ?? []).map((channelId) => ({ trigger_id: t.id, channel_id: channelId, automation_id: t.automation_id }))),
          configs: {
            statuses: Statuses,
            events: TriggerEvents,
            conditionTypes: ConditionTypes,
            conditionsJoiners: ["and", "or"],
            waitUnits: ["seconds", "minutes", "hours", "days"],
            voiceMaxBytes: voiceLimitBytes,
            runsPerContactPerHour: 10
          },
          runs: recent.items,
          runSteps: [],
          templateCategories: [],
          templates: [],
          templateDefinitions: [],
          actionGroups: actionGroups(),
          applicationSources: ["msgr_a", "msgr_a_business", "msgr_b", "msgr_c_business"].map((type) => ({ id: type, channelType: type })),
          actionLibraryGroups: actionGroups().map((g) => ({ id: g.id, name: g.name, actionIds: g.actions.map((a) => a.id) }))
        }
      })

      const voice = Effect.fn("Automations.voice")(function*(parts: Stream.Stream<Multipart.Part, Multipart.MultipartError>) {
        yield* requirePermission("automation.create")
        const upload = yield* media.voice(parts)
        if (upload.size > voiceLimitBytes) return yield* invalidField("file", "The file must not be greater than 16384 kilobytes.")
        return {
          media_id: upload.media_id,
          type: upload.type,
          mime_type: upload.mime_type,
          size: upload.size,
          duration: upload.duration ?? null,
          expires_at: null
        }
      })

      return Automations.of({ bootstrap, list, get, create, update, builder, delete: remove, runs, run, voice })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([AutomationsRepo.layer, Media.layer]))
}

/** The voice upload of the messenger send actions: 16 MB. */
export const voiceLimitBytes = 16 * 1024 * 1024

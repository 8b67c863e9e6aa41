import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId, CurrentActor } from "../auth/Domain.ts"
import {
  type FeatureNotAvailable,
  type Forbidden,
  invalidField,
  type NotFound,
  notFound,
  ruleViolation,
  type Unprocessable, orNotFound } from "../platform/Errors.ts"
import { configure, dealsAccess } from "./Access.ts"
import type {
  DealType,
  DealTypeInput,
  DealTypePatch,
  Funnel,
  FunnelInput,
  FunnelPatch,
  LostReason,
  LostReasonInput,
  LostReasonPatch,
  Stage,
  StageInput,
  StagePatch
} from "./Domain.ts"
import { FunnelsRepo } from "./FunnelsRepo.ts"

export const funnelNotFound = () => notFound("Funnel not found.")
const stageNotFound = () => notFound("Stage not found.")
const typeNotFound = () => notFound("Deal type not found.")
const reasonNotFound = () => notFound("Lost reason not found.")
const needsOpenStage = (field: string) => invalidField(field, "A funnel needs at least one open stage.")
const reasonTaken = () => invalidField("name", "The name has already been taken.")

const defaultStages: ReadonlyArray<StageInput> = [
  { name: "New", type: "open" },
  { name: "Won", type: "success" },
  { name: "Lost", type: "failed" }
]

type Denied = Forbidden | FeatureNotAvailable
type Eff<A, E = never> = Effect.Effect<A, Denied | E, CurrentActor>

/** Funnels with their stages, deal types and lost reasons of a company. */
export class Funnels extends Context.Service<Funnels, {
  readonly list: Eff<ReadonlyArray<Funnel>>
  get(id: number): Eff<Funnel, NotFound>
  create(input: FunnelInput): Eff<Funnel, Unprocessable>
  update(id: number, patch: FunnelPatch): Eff<Funnel, NotFound | Unprocessable>
  delete(id: number): Eff<void, NotFound | Unprocessable>
  addStage(funnelId: number, input: StageInput): Eff<Stage, NotFound | Unprocessable>
  updateStage(funnelId: number, stageId: number, patch: StagePatch): Eff<Stage, NotFound | Unprocessable>
  deleteStage(funnelId: number, stageId: number): Eff<void, NotFound | Unprocessable>
  readonly listTypes: Eff<ReadonlyArray<DealType>>
  createType(input: DealTypeInput): Eff<DealType>
  updateType(id: number, patch: DealTypePatch): Eff<DealType, NotFound>
  deleteType(id: number): Eff<void, NotFound>
  readonly listReasons: Eff<ReadonlyArray<LostReason>>
  createReason(input: LostReasonInput): Eff<LostReason, Unprocessable>
  updateReason(id: number, patch: LostReasonPatch): Eff<LostReason, NotFound | Unprocessable>
  deleteReason(id: number): Eff<void, NotFound>
}>()("crm/deals/Funnels") {
  static readonly layerNoDeps = Layer.effect(
    Funnels,
    Effect.gen(function*() {
      const repo = yield* FunnelsRepo
      const sql = yield* SqlClient.SqlClient
      const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        effect.pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))

      const load = (companyId: CompanyId, id: number) =>
        Effect.flatMap(repo.find(companyId, id), Option.match({ onNone: () => Effect.fail(funnelNotFound()), onSome: Effect.succeed }))

      const list = Effect.gen(function*() {
        const company = yield* dealsAccess("deal.view")
        return yield* repo.list(company.id)
      }).pipe(Effect.withSpan("Funnels.list"))

      const get = Effect.fn("Funnels.get")(function*(id: number) {
        const company = yield* dealsAccess("deal.view")
        return yield* load(company.id, id)
      })

      const create = Effect.fn("Funnels.create")(function*(input: FunnelInput) {
        const company = yield* dealsAccess(configure)
        const stages = input.stages ?? defaultStages
        if (!stages.some((s) => s.type === "open")) return yield* needsOpenStage("stages")
        // The company's first funnel is its default.
        yield* repo.lockDefault(company.id)
        const first = (yield* repo.count(company.id)) === 0
        const isDefault = first || input.is_default === true
        if (isDefault) yield* repo.clearDefault(company.id)
        const id = yield* repo.insert(company.id, { name: input.name.trim(), order: input.order ?? 0, is_default: isDefault })
        for (const [index, stage] of stages.entries()) {
          yield* repo.insertStage(company.id, id, { name: stage.name.trim(), type: stage.type, order: stage.order ?? index })
        }
        return yield* orNotFound(yield* repo.find(company.id, id))
      }, transaction)

      const update = Effect.fn("Funnels.update")(function*(id: number, patch: FunnelPatch) {
        const company = yield* dealsAccess(configure)
        const funnel = yield* Effect.flatMap(
          repo.find(company.id, id, { forUpdate: true }),
          Option.match({ onNone: () => Effect.fail(funnelNotFound()), onSome: Effect.succeed })
        )
        if (patch.is_default === false && funnel.is_default) {
          return yield* invalidField("is_default", "A company keeps one default funnel: make another funnel the default instead.")
        }
        if (patch.is_default === true && !funnel.is_default) {
          yield* repo.lockDefault(company.id)
          yield* repo.clearDefault(company.id)
        }
        yield* repo.update(company.id, id, {
          ...(patch.name !== undefined ? { name: patch.name.trim() } : {}),
          ...(patch.order !== undefined ? { order: patch.order } : {}),
          ...(patch.is_default === true ? { is_default: true } : {})
        })
        return yield* orNotFound(yield* repo.find(company.id, id))
      }, transaction)

      const remove = Effect.fn("Funnels.delete")(function*(id: number) {
        const company = yield* dealsAccess(configure)
        const funnel = yield* Effect.flatMap(
          repo.find(company.id, id, { forUpdate: true }),
          Option.match({ onNone: () => Effect.fail(funnelNotFound()), onSome: Effect.succeed })
        )
        const holding = ruleViolation("funnel_has_deals", "The funnel still holds deals; move or delete them first.")
        if ((yield* repo.dealsIn(company.id, { funnelId: id })) > 0) return yield* holding
        if (!(yield* repo.delete(company.id, id))) return yield* holding
        if (funnel.is_default) {
          const next = yield* repo.fallback(company.id)
          if (Option.isSome(next)) yield* repo.update(company.id, next.value.id, { is_default: true })
        }
      }, transaction)

      /** The funnel locked, so two concurrent stage changes cannot both remove its last open stage. */
      const lockFunnel = (companyId: CompanyId, funnelId: number) =>
        Effect.flatMap(
          repo.find(companyId, funnelId, { forUpdate: true }),
          Option.match({ onNone: () => Effect.fail(funnelNotFound()), onSome: Effect.succeed })
        )

      const stageOf = (funnel: Funnel, stageId: number) =>
        Option.match(Option.fromNullishOr(funnel.stages.find((s) => s.id === stageId)), {
          onNone: () => Effect.fail(stageNotFound()),
          onSome: Effect.succeed
        })

      const addStage = Effect.fn("Funnels.addStage")(function*(funnelId: number, input: StageInput) {
        const company = yield* dealsAccess(configure)
        yield* lockFunnel(company.id, funnelId)
        const id = yield* repo.insertStage(company.id, funnelId, { name: input.name.trim(), type: input.type, order: input.order })
        return yield* orNotFound(yield* repo.stage(company.id, id))
      }, transaction)

      const updateStage = Effect.fn("Funnels.updateStage")(function*(funnelId: number, stageId: number, patch: StagePatch) {
        const company = yield* dealsAccess(configure)
        const funnel = yield* lockFunnel(company.id, funnelId)
        const stage = yield* stageOf(funnel, stageId)
        if (stage.type === "open" && patch.type !== undefined && patch.type !== "open") {
          if (funnel.stages.filter((s) => s.type === "open").length === 1) return yield* needsOpenStage("type")
        }
        yield* repo.updateStage(company.id, stageId, {
          ...(patch.name !== undefined ? { name: patch.name.trim() } : {}),
          ...(patch.type !== undefined ? { type: patch.type } : {}),
          ...(patch.order !== undefined ? { order: patch.order } : {})
        })
        return yield* orNotFound(yield* repo.stage(company.id, stageId))
      }, transaction)

      const deleteStage = Effect.fn("Funnels.deleteStage")(function*(funnelId: number, stageId: number) {
        const company = yield* dealsAccess(configure)
        const funnel = yield* lockFunnel(company.id, funnelId)
        const stage = yield* stageOf(funnel, stageId)
        const holding = ruleViolation("stage_has_deals", "The stage still holds deals; move them to another stage first.")
        if ((yield* repo.dealsIn(company.id, { stageId })) > 0) return yield* holding
        if (stage.type === "open" && funnel.stages.filter((s) => s.type === "open").length === 1) {
          return yield* ruleViolation("last_open_stage", "A funnel needs at least one open stage.")
        }
        if (!(yield* repo.deleteStage(company.id, stageId))) return yield* holding
      }, transaction)

      const listTypes = Effect.gen(function*() {
        const company = yield* dealsAccess("deal.view")
        return yield* repo.listTypes(company.id)
      }).pipe(Effect.withSpan("Funnels.listTypes"))

      const createType = Effect.fn("Funnels.createType")(function*(input: DealTypeInput) {
        const company = yield* dealsAccess(configure)
        const id = yield* repo.insertType(company.id, { name: input.name.trim(), order: input.order })
        return yield* orNotFound(yield* repo.findType(company.id, id))
      })

      const updateType = Effect.fn("Funnels.updateType")(function*(id: number, patch: DealTypePatch) {
        const company = yield* dealsAccess(configure)
        const updated = yield* repo.updateType(company.id, id, {
          ...(patch.name !== undefined ? { name: patch.name.trim() } : {}),
          ...(patch.order !== undefined ? { order: patch.order } : {})
        })
        if (!updated) return yield* typeNotFound()
        return yield* orNotFound(yield* repo.findType(company.id, id))
      })

      const deleteType = Effect.fn("Funnels.deleteType")(function*(id: number) {
        const company = yield* dealsAccess(configure)
        if (!(yield* repo.deleteType(company.id, id))) return yield* typeNotFound()
      })

      const listReasons = Effect.gen(function*() {
        const company = yield* dealsAccess("deal.view")
        return yield* repo.listReasons(company.id)
      }).pipe(Effect.withSpan("Funnels.listReasons"))

      const createReason = Effect.fn("Funnels.createReason")(function*(input: LostReasonInput) {
        const company = yield* dealsAccess("lost_reason.manage")
        const id = yield* repo.insertReason(company.id, { name: input.name.trim(), is_active: input.is_active ?? true, order: input.order })
        if (Option.isNone(id)) return yield* reasonTaken()
        return yield* orNotFound(yield* repo.findReason(company.id, id.value))
      })

      const updateReason = Effect.fn("Funnels.updateReason")(function*(id: number, patch: LostReasonPatch) {
        const company = yield* dealsAccess("lost_reason.manage")
        const updated = yield* repo.updateReason(company.id, id, {
          ...(patch.name !== undefined ? { name: patch.name.trim() } : {}),
          ...(patch.is_active !== undefined ? { is_active: patch.is_active } : {}),
          ...(patch.order !== undefined ? { order: patch.order } : {})
        })
        if (Option.isNone(updated)) return yield* reasonTaken()
        if (!updated.value) return yield* reasonNotFound()
        return yield* orNotFound(yield* repo.findReason(company.id, id))
      })

      const deleteReason = Effect.fn("Funnels.deleteReason")(function*(id: number) {
        const company = yield* dealsAccess("lost_reason.manage")
        if (!(yield* repo.deleteReason(company.id, id))) return yield* reasonNotFound()
      })

      return Funnels.of({
        list,
        get,
        create,
        update,
        delete: remove,
        addStage,
        updateStage,
        deleteStage,
        listTypes,
        createType,
        updateType,
        deleteType,
        listReasons,
        createReason,
        updateReason,
        deleteReason
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(FunnelsRepo.layer))
}

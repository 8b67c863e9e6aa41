import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { type CompanyId, CurrentActor } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import {
  type FeatureNotAvailable,
  type Forbidden,
  invalidField,
  type NotFound,
  notFound,
  type Unprocessable, orNotFound } from "../platform/Errors.ts"
import { pageInfo } from "../platform/Pagination.ts"
import { dealsAccess } from "./Access.ts"
import type { Activity, CreateDeal, Deal, DealChanges, DealListQuery, DealStatus, NoteInput, PageQuery, Stage, UpdateDeal } from "./Domain.ts"
import { FunnelsRepo } from "./FunnelsRepo.ts"
import { type DealColumns, DealsRepo } from "./Repo.ts"
import { changedFields, normalizeAmount, statusOfStage, trackedFields } from "./Rules.ts"
import { type NewActivity, TimelineRepo } from "./TimelineRepo.ts"

export const dealNotFound = () => notFound("Deal not found.")

export const messages = {
  stageRequired: "A funnel_stage_id is required when changing funnel_id.",
  stageOutside: "Selected stage does not belong to the selected funnel.",
  reasonRequired: "A lost reason is required when marking a deal as lost."
} as const

const invalid = (field: string) => invalidField(field, `The selected ${field} is invalid.`)

type Denied = Forbidden | FeatureNotAvailable
type Eff<A, E = never> = Effect.Effect<A, Denied | E, CurrentActor>

interface Paged<A> {
  readonly items: ReadonlyArray<A>
  readonly pagination: ReturnType<typeof pageInfo>
}

/** Deals, their state table and their timeline. */
/** Fields a deal takes from the request as they are, on create and on update. */
const copiedFields = [
  "conversation_id",
  "type_id",
  "utm_source",
  "utm_medium",
  "utm_campaign",
  "probability",
  "comments",
  "begin_date",
  "expected_close_date",
  "channel"
] as const

export class Deals extends Context.Service<Deals, {
  list(query: DealListQuery): Eff<Paged<Deal>, Unprocessable>
  forContact(contactId: number, query: PageQuery): Eff<Paged<Deal>, NotFound>
  get(id: number): Eff<Deal, NotFound>
  create(input: CreateDeal): Eff<Deal, Unprocessable>
  update(id: number, patch: UpdateDeal): Eff<DealChanges, NotFound | Unprocessable>
  delete(id: number): Eff<void, NotFound>
  restore(id: number): Eff<Deal, NotFound>
  activities(id: number, query: PageQuery): Eff<Paged<Activity>, NotFound>
  addNote(id: number, input: NoteInput): Eff<Activity, NotFound>
}>()("crm/deals/Deals") {
  static readonly layerNoDeps = Layer.effect(
    Deals,
    Effect.gen(function*() {
      const repo = yield* DealsRepo
      const funnels = yield* FunnelsRepo
      const timeline = yield* TimelineRepo
      const events = yield* Events
      const sql = yield* SqlClient.SqlClient
      const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        effect.pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      const live = Effect.fnUntraced(function*(companyId: CompanyId, id: number, forUpdate = false) {
        const deal = yield* repo.find(companyId, id, { forUpdate })
        if (Option.isNone(deal) || deal.value.deleted_at !== null) return yield* dealNotFound()
        return deal.value
      })

      const list = Effect.fn("Deals.list")(function*(query: DealListQuery) {
        const company = yield* dealsAccess("deal.view")
        const perPage = query.perPage ?? 20
        const page = query.page ?? 1
        const { items, total } = yield* repo.list(company.id, query, perPage, (page - 1) * perPage)
        return { items, pagination: pageInfo(page, perPage, total) }
      })

      const forContact = Effect.fn("Deals.forContact")(function*(contactId: number, query: PageQuery) {
        const company = yield* dealsAccess("deal.view")
        if (!(yield* repo.contactExists(company.id, contactId))) return yield* notFound("Contact not found.")
        const perPage = query.perPage ?? 20
        const page = query.page ?? 1
        const { items, total } = yield* repo.list(company.id, { contact_id: contactId }, perPage, (page - 1) * perPage)
        return { items, pagination: pageInfo(page, perPage, total) }
      })

      const get = Effect.fn("Deals.get")(function*(id: number) {
        const company = yield* dealsAccess("deal.view")
        return yield* live(company.id, id)
      })

      /** The stage a request names, checked against the funnel it ends up in. */
      const stageFor = Effect.fnUntraced(function*(companyId: CompanyId, funnelId: number, stageId: number) {
        const stage = yield* funnels.stage(companyId, stageId)
        if (Option.isNone(stage)) return yield* invalid("funnel_stage_id")
        if (stage.value.funnel_id !== funnelId) return yield* invalidField("funnel_stage_id", messages.stageOutside)
        return stage.value
      })

      const checkRefs = Effect.fnUntraced(function*(companyId: CompanyId, input: UpdateDeal) {
        if (input.contact_id !== undefined && !(yield* repo.contactExists(companyId, input.contact_id))) return yield* invalid("contact_id")
        if (input.responsible_user_id !== undefined && !(yield* repo.isMember(companyId, input.responsible_user_id))) {
          return yield* invalid("responsible_user_id")
        }
        if (input.type_id != null && Option.isNone(yield* funnels.findType(companyId, input.type_id))) return yield* invalid("type_id")
        if (input.conversation_id != null && !(yield* repo.conversationExists(companyId, input.conversation_id))) {
          return yield* invalid("conversation_id")
        }
      })

      /** Lost reason columns for a deal entering (or staying) lost; 422 when entering without one. */
      const lostReasonFor = Effect.fnUntraced(function*(companyId: CompanyId, input: UpdateDeal, current: Deal | null) {
        const text = input.lost_reason?.trim() || null
        const reasonId = input.lost_reason_id ?? null
        if (reasonId === null && text === null) {
          if (current !== null && current.status === "lost") return { lost_reason: current.lost_reason, lost_reason_id: current.lost_reason_id }
          return yield* invalidField("lost_reason_id", messages.reasonRequired)
        }
        if (reasonId !== null) {
          const reason = yield* funnels.findReason(companyId, reasonId)
          if (Option.isNone(reason) || !reason.value.is_active) return yield* invalid("lost_reason_id")
          return { lost_reason: text ?? reason.value.name, lost_reason_id: reasonId }
        }
        return { lost_reason: text, lost_reason_id: null }
      })

      const conversationTaken = () => invalidField("conversation_id", "The conversation already has a deal.")

      const stageName = (stage: Stage | undefined) => stage?.name ?? ""

      const create = Effect.fn("Deals.create")(function*(input: CreateDeal) {
        const company = yield* dealsAccess("deal.create")
        const actor = yield* CurrentActor
        yield* checkRefs(company.id, input)
        let stage: Stage
        if (input.funnel_stage_id === undefined) {
          if (input.funnel_id !== undefined) return yield* invalidField("funnel_stage_id", messages.stageRequired)
          const funnel = yield* funnels.fallback(company.id)
          if (Option.isNone(funnel)) return yield* invalidField("funnel_id", "The company has no funnel yet: create one first.")
          stage = yield* orNotFound(yield* funnels.firstOpenStage(company.id, funnel.value.id))
        } else {
          const named = yield* funnels.stage(company.id, input.funnel_stage_id)
          if (Option.isNone(named)) return yield* invalid("funnel_stage_id")
          if (input.funnel_id !== undefined && Option.isNone(yield* funnels.find(company.id, input.funnel_id))) return yield* invalid("funnel_id")
          stage = yield* stageFor(company.id, input.funnel_id ?? named.value.funnel_id, input.funnel_stage_id)
        }
        const status: DealStatus = input.status ?? statusOfStage(stage.type)
        const at = yield* now
        const amount = normalizeAmount(input.amount ?? "0")
        const currency = input.currency ?? (yield* repo.currency(company.id))
        const closing: DealColumns = status === "open"
          ? {}
          : {
            closed_at: at,
            closed_amount: amount,
            closed_currency: currency,
            ...(status === "lost" ? yield* lostReasonFor(company.id, input, null) : {})
          }
        const id = yield* repo.insert(company.id, {
          contact_id: input.contact_id,
          funnel_id: stage.funnel_id,
          funnel_stage_id: stage.id,
          title: input.title.trim(),
          amount,
          currency,
          status,
          source: input.source?.trim() ?? "manual",
          responsible_user_id: input.responsible_user_id ?? actor.userId,
          custom_fields: JSON.stringify(input.custom_fields ?? {}),
          stage_changed_at: at,
          ...pick(input, copiedFields),
          ...closing
        })
        if (Option.isNone(id)) return yield* conversationTaken()
        const deal = yield* orNotFound(yield* repo.find(company.id, id.value))
        yield* timeline.add(company.id, deal.id, { type: "created", actorUserId: actor.userId, body: deal.title })
        yield* events.emit(company.id, "deal.created", { deal })
        if (status !== "open") yield* closedEntry(company.id, deal, actor.userId)
        return deal
      }, transaction)

      const closedEntry = Effect.fnUntraced(function*(companyId: CompanyId, deal: Deal, actorUserId: number) {
        yield* timeline.add(companyId, deal.id, deal.status === "won"
          ? { type: "won", actorUserId, metadata: { closed_amount: deal.closed_amount, closed_currency: deal.closed_currency } }
          : {
            type: "lost",
            actorUserId,
            body: deal.lost_reason,
            metadata: {
              lost_reason_id: deal.lost_reason_id,
              lost_reason: deal.lost_reason,
              closed_amount: deal.closed_amount,
              closed_currency: deal.closed_currency
            }
          })
        yield* events.emit(companyId, deal.status === "won" ? "deal.won" : "deal.lost", { deal })
      })

      const update = Effect.fn("Deals.update")(function*(id: number, patch: UpdateDeal) {
        const company = yield* dealsAccess("deal.update")
        const actor = yield* CurrentActor
        const before = yield* live(company.id, id, true)
        const funnelChanges = patch.funnel_id !== undefined && patch.funnel_id !== before.funnel_id
        if (funnelChanges && patch.funnel_stage_id === undefined) return yield* invalidField("funnel_stage_id", messages.stageRequired)
        if (funnelChanges && Option.isNone(yield* funnels.find(company.id, patch.funnel_id!))) return yield* invalid("funnel_id")
        yield* checkRefs(company.id, patch)
        const funnelId = patch.funnel_id ?? before.funnel_id
        const stage = patch.funnel_stage_id === undefined ? null : yield* stageFor(company.id, funnelId, patch.funnel_stage_id)
        const stageChanged = stage !== null && stage.id !== before.funnel_stage_id
        const status: DealStatus = patch.status ?? (stageChanged ? statusOfStage(stage.type) : before.status)
        const at = yield* now
        const amount = patch.amount === undefined ? before.amount : normalizeAmount(patch.amount)
        const currency = patch.currency ?? before.currency

        const columns: Record<string, unknown> = {}
        const set = <K extends keyof DealColumns>(key: K, value: DealColumns[K]) => {
          columns[key] = value
        }
        for (
          const key of ["contact_id", ...copiedFields, "responsible_user_id"] as const
        ) {
          if (patch[key] !== undefined && patch[key] !== before[key]) set(key, patch[key])
        }
        if (patch.title !== undefined && patch.title.trim() !== before.title) set("title", patch.title.trim())
        if (patch.source !== undefined && patch.source.trim() !== before.source) set("source", patch.source.trim())
        if (amount !== before.amount) set("amount", amount)
        if (currency !== before.currency) set("currency", currency)
        if (patch.custom_fields !== undefined && JSON.stringify(patch.custom_fields ?? {}) !== JSON.stringify(before.custom_fields)) {
          set("custom_fields", JSON.stringify(patch.custom_fields ?? {}))
        }
        if (stageChanged) {
          set("funnel_id", stage.funnel_id)
          set("funnel_stage_id", stage.id)
          set("stage_changed_at", at)
        }
        if (status !== before.status) set("status", status)
        if (status === "open" && before.status !== "open") {
          Object.assign(columns, { closed_at: null, lost_reason: null, lost_reason_id: null, closed_amount: null, closed_currency: null })
        } else if (status !== "open" && before.status !== status) {
          Object.assign(columns, {
            closed_at: at,
            closed_amount: amount,
            closed_currency: currency,
            ...(status === "lost" ? yield* lostReasonFor(company.id, patch, before) : { lost_reason: null, lost_reason_id: null })
          })
        } else if (status === "lost" && (patch.lost_reason !== undefined || patch.lost_reason_id !== undefined)) {
          const reason = yield* lostReasonFor(company.id, patch, before)
          if (reason.lost_reason !== before.lost_reason || reason.lost_reason_id !== before.lost_reason_id) Object.assign(columns, reason)
        }
        if (Object.keys(columns).length === 0) return { id: before.id }

        const written = yield* repo.update(company.id, id, columns as DealColumns, at)
        if (Option.isNone(written)) return yield* conversationTaken()
        const after = written.value

        const entries: Array<NewActivity> = []
        const by = actor.userId
        for (const field of trackedFields) {
          if (before[field] !== after[field]) {
            entries.push({ type: "field_changed", actorUserId: by, metadata: { field, from: before[field], to: after[field] } })
          }
        }
        if (before.responsible_user_id !== after.responsible_user_id) {
          entries.push({
            type: "responsible_changed",
            actorUserId: by,
            metadata: { field: "responsible_user_id", from: before.responsible_user_id, to: after.responsible_user_id }
          })
        }
        if (before.funnel_stage_id !== after.funnel_stage_id) {
          const from = Option.getOrUndefined(yield* funnels.stage(company.id, before.funnel_stage_id))
          entries.push({
            type: "stage_changed",
            actorUserId: by,
            body: `${stageName(from)} → ${stageName(stage ?? undefined)}`,
            metadata: { from: before.funnel_stage_id, to: after.funnel_stage_id }
          })
        }
        if (after.status === "open" && before.status !== "open") {
          entries.push({ type: "field_changed", actorUserId: by, metadata: { field: "status", from: before.status, to: "open" } })
        }
        for (const entry of entries) yield* timeline.add(company.id, id, entry)

        const changes = changedFields(before, after)
        yield* events.emit(company.id, "deal.updated", { deal: after, changes: Object.keys(changes).filter((k) => k !== "id") })
        if (before.funnel_stage_id !== after.funnel_stage_id) {
          yield* events.emit(company.id, "deal.stage_changed", { deal: after, from: before.funnel_stage_id, to: after.funnel_stage_id })
        }
        if (after.status !== "open" && after.status !== before.status) yield* closedEntry(company.id, after, by)
        return changes
      }, transaction)

      const remove = Effect.fn("Deals.delete")(function*(id: number) {
        const company = yield* dealsAccess("deal.delete")
        const deal = yield* live(company.id, id, true)
        const at = yield* now
        yield* repo.setDeleted(company.id, id, at)
        yield* events.emit(company.id, "deal.deleted", { deal: { ...deal, deleted_at: at.toISOString() } })
      }, transaction)

      const restore = Effect.fn("Deals.restore")(function*(id: number) {
        const company = yield* dealsAccess("deal.delete")
        const deal = yield* repo.find(company.id, id, { forUpdate: true })
        if (Option.isNone(deal)) return yield* dealNotFound()
        if (deal.value.deleted_at === null) return deal.value
        yield* repo.setDeleted(company.id, id, null)
        const restored = yield* orNotFound(yield* repo.find(company.id, id))
        yield* events.emit(company.id, "deal.restored", { deal: restored })
        return restored
      }, transaction)

      const activities = Effect.fn("Deals.activities")(function*(id: number, query: PageQuery) {
        const company = yield* dealsAccess("deal.view")
        yield* live(company.id, id)
        const perPage = query.perPage ?? 20
        const page = query.page ?? 1
        const { items, total } = yield* timeline.page(company.id, id, perPage, (page - 1) * perPage)
        return { items, pagination: pageInfo(page, perPage, total) }
      })

      const addNote = Effect.fn("Deals.addNote")(function*(id: number, input: NoteInput) {
        const company = yield* dealsAccess("deal.update")
        const actor = yield* CurrentActor
        yield* live(company.id, id)
        const entry = yield* timeline.add(company.id, id, { type: "note", actorUserId: actor.userId, body: input.body.trim() })
        return yield* orNotFound(yield* timeline.find(company.id, entry))
      }, transaction)

      return Deals.of({ list, forContact, get, create, update, delete: remove, restore, activities, addNote })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide([DealsRepo.layer, FunnelsRepo.layer, TimelineRepo.layer])
  )
}

const pick = <A extends object, K extends keyof A>(input: A, keys: ReadonlyArray<K>) => {
  const out: Partial<Pick<A, K>> = {}
  for (const key of keys) if (input[key] !== undefined) out[key] = input[key]
  return out
}

import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { type CompanyId, type CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import {
  type Forbidden,
  invalidField,
  invalidFields,
  type NotFound,
  notFound,
  ruleViolation,
  type Unprocessable, orNotFound } from "../platform/Errors.ts"
import { offsetOf, pageInfo } from "../platform/Pagination.ts"
import { type Definition, type FieldErrors, parse, type Rule } from "./Compiler.ts"
import type {
  ConditionInput,
  CreateSegment,
  EstimateInput,
  GroupLogic,
  ListParams,
  MembersInput,
  Segment,
  SegmentId,
  UpdateSegment
} from "./Domain.ts"
import { type SegmentRow, SegmentsRepo, toSegment } from "./Repo.ts"
import { staticSummary, summarize } from "./Summary.ts"

const segmentNotFound = () => notFound("Segment not found.")
const DefaultPerPage = 50

/** Wire ids are strings of digits; anything else names no segment. */
const rowId = (id: SegmentId) => (/^[1-9]\d{0,15}$/.test(id) ? Option.some(Number(id)) : Option.none())

/** Lower-case letters and digits of any script joined by `-`; accents dropped. */
export const slugify = (name: string) => {
  const slug = name.normalize("NFKD").replace(/\p{M}+/gu, "").toLowerCase().replace(/[^\p{L}\p{N}]+/gu, "-")
    .replace(/^-+|-+$/g, "").slice(0, 80).replace(/-+$/, "")
  return slug === "" ? "segment" : slug
}

const withoutMembers = (segment: Segment) => ({ ...segment, members: undefined })

export interface Page {
  readonly items: ReadonlyArray<Segment>
  readonly pagination: ReturnType<typeof pageInfo>
}

export class Segments extends Context.Service<Segments, {
  list(params: ListParams): Effect.Effect<Page, Forbidden, CurrentActor>
  create(input: CreateSegment): Effect.Effect<Segment, Forbidden | Unprocessable, CurrentActor>
  update(id: SegmentId, input: UpdateSegment): Effect.Effect<Segment, Forbidden | NotFound | Unprocessable, CurrentActor>
  delete(id: SegmentId): Effect.Effect<void, Forbidden | NotFound, CurrentActor>
  estimate(input: EstimateInput): Effect.Effect<{ readonly estimated_count: number }, Forbidden | Unprocessable, CurrentActor>
  addMembers(id: SegmentId, input: MembersInput): Effect.Effect<Segment, Forbidden | NotFound | Unprocessable, CurrentActor>
  removeMembers(id: SegmentId, input: MembersInput): Effect.Effect<Segment, Forbidden | NotFound | Unprocessable, CurrentActor>
}>()("crm/segments/Segments") {
  static readonly layerNoDeps = Layer.effect(
    Segments,
    Effect.gen(function*() {
      const repo = yield* SegmentsRepo
      const events = yield* Events
      const sql = yield* SqlClient.SqlClient

      const present = Effect.fnUntraced(function*(companyId: CompanyId, row: SegmentRow) {
        if (row.type === "dynamic") return toSegment(row, null)
        const members = yield* repo.membersOf(companyId, [row.id])
        return toSegment(row, members.get(row.id) ?? [])
      })

      /**
       * Conditions checked for shape, then their tag and channel ids against the company; the
       * names found feed the summary.
       */
      const checkConditions = Effect.fnUntraced(function*(
        companyId: CompanyId,
        inputs: ReadonlyArray<ConditionInput>,
        groupLogic: GroupLogic
      ) {
        const parsed = parse(inputs)
        if (parsed._tag === "Invalid") return yield* invalidFields(parsed.errors)
        const idsOf = (type: "tag" | "channel") =>
          parsed.rules.flatMap((rule) => (rule.type === type ? rule.ids : []))
        const tags = yield* repo.tagNames(companyId, [...new Set(idsOf("tag"))])
        const channels = yield* repo.channelNames(companyId, [...new Set(idsOf("channel"))])
        const errors: FieldErrors = {}
        parsed.rules.forEach((rule, index) => {
          if (rule.type !== "tag" && rule.type !== "channel") return
          const known = rule.type === "tag" ? tags : channels
          if (rule.ids.some((id) => !known.has(id))) {
            errors[`conditions.${index}.value`] = [`The selected conditions.${index}.value has an unknown ${rule.type} id.`]
          }
        })
        if (Object.keys(errors).length > 0) return yield* invalidFields(errors)
        return { rules: parsed.rules, summary: summarize(parsed.rules, groupLogic, { tags, channels }) }
      })

      const checkMembers = Effect.fnUntraced(function*(companyId: CompanyId, contactIds: ReadonlyArray<number>) {
        const live = yield* repo.liveContacts(companyId, contactIds)
        const errors: FieldErrors = {}
        contactIds.forEach((id, index) => {
          if (!live.has(id)) errors[`contact_ids.${index}`] = [`The selected contact_ids.${index} is invalid.`]
        })
        if (Object.keys(errors).length > 0) return yield* invalidFields(errors)
        return [...new Set(contactIds)]
      })

      /** The first free `slug`, `slug-2`, `slug-3`, … of the company. */
      const freeSlug = Effect.fnUntraced(function*(companyId: CompanyId, name: string, except: number | null) {
        const base = slugify(name)
        const taken = yield* repo.slugsLike(companyId, base, except)
        let n = 1
        while (taken.has(n === 1 ? base : `${base}-${n}`)) n++
        return n === 1 ? base : `${base}-${n}`
      })

      const definitionOf = (row: SegmentRow, rules: ReadonlyArray<Rule>): Definition =>
        row.type === "static"
          ? { type: "static", segmentId: row.id }
          : { type: "dynamic", groupLogic: row.group_logic, rules }

      /**
       * Counts the members of the segment as saved and stores the count (and, for static lists, the
       * summary that names it).
       */
      const refresh = Effect.fnUntraced(function*(companyId: CompanyId, id: number, rules: ReadonlyArray<Rule>) {
        const saved = yield* orNotFound(yield* repo.find(companyId, id))
        const count = yield* repo.count(companyId, definitionOf(saved, rules))
        yield* repo.setEstimate(companyId, id, count, saved.type === "static" ? staticSummary(count) : undefined)
        return yield* present(companyId, { ...saved, estimated_count: count, ...(saved.type === "static" ? { conditions_summary: staticSummary(count) } : {}) })
      })

      const list = Effect.fn("Segments.list")(function*(params: ListParams) {
        const company = yield* requirePermission("segment.view")
        const page = params.page ?? 1
        const perPage = params.perPage ?? DefaultPerPage
        const search = params.search?.trim() ?? ""
        const { rows, total } = yield* repo.list(company.id, search === "" ? null : search, perPage, offsetOf(page, perPage))
        const members = yield* repo.membersOf(company.id, rows.filter((row) => row.type === "static").map((row) => row.id))
        return {
          items: rows.map((row) => toSegment(row, row.type === "static" ? members.get(row.id) ?? [] : null)),
          pagination: pageInfo(page, perPage, total)
        }
      })

      const create = Effect.fn("Segments.create")(function*(input: CreateSegment) {
        const company = yield* requirePermission("segment.create")
        const type = input.type ?? "dynamic"
        const groupLogic = input.group_logic ?? "and"
        const conditions = input.conditions ?? []
        let rules: ReadonlyArray<Rule> = []
        let summary = staticSummary(0)
        let members: ReadonlyArray<number> = []
        if (type === "static") {
          if (conditions.length > 0) return yield* invalidField("conditions", "A static segment has no conditions: list its members in contact_ids.")
          members = yield* checkMembers(company.id, input.contact_ids ?? [])
        } else {
          if ((input.contact_ids ?? []).length > 0) return yield* invalidField("contact_ids", "Only a static segment has explicit members.")
          const checked = yield* checkConditions(company.id, conditions, groupLogic)
          rules = checked.rules
          summary = checked.summary
        }
        return yield* Effect.gen(function*() {
          const fields = {
            name: input.name.trim(),
            description: input.description?.trim() ?? "",
            type,
            conditions: rules.map((rule) => rule.condition),
            group_logic: groupLogic,
            conditions_summary: summary
          }
          // Concurrent creates with one name take their slugs one after the other.
          yield* repo.lockSlugs(company.id)
          const id = yield* orNotFound(yield* repo.insert(company.id, { ...fields, slug: yield* freeSlug(company.id, fields.name, null) }))
          yield* repo.addMembers(company.id, id, members)
          const segment = yield* refresh(company.id, id, rules)
          yield* events.emit(company.id, "segment.created", withoutMembers(segment))
          return segment
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      const update = Effect.fn("Segments.update")(function*(id: SegmentId, input: UpdateSegment) {
        const company = yield* requirePermission("segment.update")
        const rid = rowId(id)
        const current = Option.isNone(rid) ? Option.none<SegmentRow>() : yield* repo.find(company.id, rid.value)
        if (Option.isNone(current)) return yield* segmentNotFound()
        const row = current.value
        if (input.type !== undefined && input.type !== row.type) {
          return yield* invalidField("type", "The type of a segment cannot be changed.")
        }
        const groupLogic = input.group_logic ?? row.group_logic
        let rules: ReadonlyArray<Rule> = []
        let summary = row.conditions_summary
        if (row.type === "static") {
          if ((input.conditions ?? []).length > 0) return yield* invalidField("conditions", "A static segment has no conditions: list its members in contact_ids.")
        } else {
          const checked = yield* checkConditions(company.id, input.conditions ?? row.conditions, groupLogic)
          rules = checked.rules
          summary = checked.summary
        }
        const updated = yield* Effect.gen(function*() {
          const locked = yield* repo.find(company.id, row.id, true)
          if (Option.isNone(locked)) return Option.none<Segment>()
          const name = input.name?.trim() ?? row.name
          const fields = {
            name,
            description: input.description === undefined ? row.description : input.description?.trim() ?? "",
            type: row.type,
            conditions: rules.map((rule) => rule.condition),
            group_logic: groupLogic,
            conditions_summary: summary
          }
          if (name !== row.name) yield* repo.lockSlugs(company.id)
          const slug = name === row.name ? row.slug : yield* freeSlug(company.id, name, row.id)
          yield* repo.update(company.id, row.id, { ...fields, slug })
          const segment = yield* refresh(company.id, row.id, rules)
          yield* events.emit(company.id, "segment.updated", withoutMembers(segment))
          return Option.some(segment)
        }).pipe(sql.withTransaction, Effect.orDie)
        if (Option.isNone(updated)) return yield* segmentNotFound()
        return updated.value
      })

      const remove = Effect.fn("Segments.delete")(function*(id: SegmentId) {
        const company = yield* requirePermission("segment.delete")
        const rid = rowId(id)
        const deleted = Option.isNone(rid) ? false : yield* Effect.gen(function*() {
          const deleted = yield* repo.delete(company.id, rid.value)
          if (deleted) yield* events.emit(company.id, "segment.deleted", { id })
          return deleted
        }).pipe(sql.withTransaction, Effect.orDie)
        if (!deleted) return yield* segmentNotFound()
      })

      const estimate = Effect.fn("Segments.estimate")(function*(input: EstimateInput) {
        const company = yield* requirePermission("segment.view")
        const groupLogic = input.group_logic ?? "and"
        const { rules } = yield* checkConditions(company.id, input.conditions, groupLogic)
        const count = yield* repo.count(company.id, { type: "dynamic", groupLogic, rules })
        return { estimated_count: count }
      })

      const changeMembers = (name: string, add: boolean) =>
        Effect.fn(name)(function*(id: SegmentId, input: MembersInput) {
          const company = yield* requirePermission("segment.update")
          const rid = rowId(id)
          const current = Option.isNone(rid) ? Option.none<SegmentRow>() : yield* repo.find(company.id, rid.value)
          if (Option.isNone(current)) return yield* segmentNotFound()
          if (current.value.type !== "static") {
            return yield* ruleViolation("segment_not_static", "Only a static segment has explicit members.")
          }
          const contactIds = add ? yield* checkMembers(company.id, input.contact_ids) : [...new Set(input.contact_ids)]
          const updated = yield* Effect.gen(function*() {
            const locked = yield* repo.find(company.id, current.value.id, true)
            if (Option.isNone(locked)) return Option.none<Segment>()
            yield* (add ? repo.addMembers : repo.removeMembers)(company.id, locked.value.id, contactIds)
            yield* repo.touch(company.id, locked.value.id)
            const segment = yield* refresh(company.id, locked.value.id, [])
            yield* events.emit(company.id, "segment.updated", withoutMembers(segment))
            return Option.some(segment)
          }).pipe(sql.withTransaction, Effect.orDie)
          if (Option.isNone(updated)) return yield* segmentNotFound()
          return updated.value
        })

      return Segments.of({
        list,
        create,
        update,
        delete: remove,
        estimate,
        addMembers: changeMembers("Segments.addMembers", true),
        removeMembers: changeMembers("Segments.removeMembers", false)
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(SegmentsRepo.layer))
}

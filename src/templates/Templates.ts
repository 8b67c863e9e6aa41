import { Context, Effect, Layer, Option } from "effect"
import { type CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { type Forbidden, invalidField, invalidFields, type NotFound, notFound, orNotFound, ruleViolation, type Unprocessable } from "../platform/Errors.ts"
import { offsetOf, pageInfo } from "../platform/Pagination.ts"
import {
  type AddLanguage,
  type AssignChannels,
  type Availability,
  type CreateTemplate,
  type ListParams,
  type Template,
  type TemplateEvent,
  templateChannelType,
  type UpdateTemplate,
  type Version
} from "./Domain.ts"
import { makeTemplateKit } from "./Kit.ts"
import { Moderation } from "./Moderation.ts"
import { contentFrom, iso, languagesOf, shown, toTemplate, versionsOf } from "./Render.ts"
import { type BusinessChannel, type Content, type GroupRow, type InstanceRow, TemplatesRepo } from "./Repo.ts"
import { contentErrors, contentOf, slugify } from "./Rules.ts"

type Denied = Forbidden | NotFound

export interface ListAnswer {
  readonly items: ReadonlyArray<Template>
  readonly pagination: ReturnType<typeof pageInfo>
  readonly facets?: {
    readonly statuses: Record<string, number>
    readonly languages: Record<string, number>
    readonly channel_types: Record<string, number>
  }
}

/**
 * Logical message templates: a group (name, slug, status) with one instance per business
 * channel and language, each moderated by the channel's provider on its own.
 */
export class Templates extends Context.Service<Templates, {
  list(query: ListParams): Effect.Effect<ListAnswer, Forbidden, CurrentActor>
  readonly channelTypes: Effect.Effect<ReadonlyArray<typeof templateChannelType>, Forbidden, CurrentActor>
  get(id: number): Effect.Effect<Template, Denied, CurrentActor>
  channels(id: number): Effect.Effect<ReadonlyArray<Availability>, Denied, CurrentActor>
  events(id: number): Effect.Effect<ReadonlyArray<TemplateEvent>, Denied, CurrentActor>
  create(input: CreateTemplate): Effect.Effect<{ readonly message: string; readonly template: Template }, Forbidden | Unprocessable, CurrentActor>
  update(id: number, input: UpdateTemplate): Effect.Effect<Template, Denied | Unprocessable, CurrentActor>
  assignChannels(id: number, input: AssignChannels): Effect.Effect<{ readonly message: string; readonly items: ReadonlyArray<Availability> }, Denied | Unprocessable, CurrentActor>
  addLanguage(id: number, input: AddLanguage): Effect.Effect<ReadonlyArray<Version>, Denied | Unprocessable, CurrentActor>
  deleteLanguage(id: number, language: string): Effect.Effect<ReadonlyArray<Version>, Denied | Unprocessable, CurrentActor>
  remove(id: number): Effect.Effect<void, Denied, CurrentActor>
  publish(id: number): Effect.Effect<Template, Denied | Unprocessable, CurrentActor>
  archive(id: number): Effect.Effect<Template, Denied | Unprocessable, CurrentActor>
  unarchive(id: number): Effect.Effect<Template, Denied | Unprocessable, CurrentActor>
}>()("crm/templates/Templates") {
  static readonly layerNoDeps = Layer.effect(
    Templates,
    Effect.gen(function*() {
      const kit = yield* makeTemplateKit
      const { repo, events, contextOf, record, transaction, load, render } = kit
      const moderation = yield* Moderation

      /** The channel ids must be the company's live business channels (422 `<field>.<i>` otherwise). */
      const businessChannels = Effect.fnUntraced(function*(companyId: CompanyId, ids: ReadonlyArray<number>, field: string) {
        const found = yield* repo.businessChannels(companyId, ids)
        const known = new Set(found.map((c) => c.id))
        const errors: Record<string, Array<string>> = {}
        ids.forEach((id, i) => {
          if (!known.has(id)) errors[`${field}.${i}`] = [`The channel ${id} is not a ${templateChannelType.key} channel of the company.`]
        })
        if (Object.keys(errors).length > 0) return yield* invalidFields(errors)
        return [...new Set(ids)]
      })

      const checkContent = (content: Content) => {
        const errors = contentErrors(content)
        return Object.keys(errors).length > 0 ? Effect.fail(invalidFields(errors)) : Effect.void
      }

      // ------------------------------------------------------------ reading

      const list = Effect.fn("Templates.list")(function*(q: ListParams) {
        const company = yield* requirePermission("template.view")
        const page = q.page ?? 1
        const perPage = q.perPage ?? 20
        const filters = {
          status: q.status,
          language: q.language?.trim() || undefined,
          search: q.search?.trim() || undefined,
          sortBy: q.sortBy ?? "created_at",
          sortDir: q.sortDir ?? "desc",
          limit: perPage,
          offset: offsetOf(page, perPage)
        }
        // Only one channel type takes templates: any other filters everything out.
        const otherType = q.channelType !== undefined && q.channelType !== templateChannelType.key
        const { ids, total } = otherType ? { ids: [], total: 0 } : yield* repo.list(company.id, filters)
        const groups = yield* repo.groups(company.id, ids)
        const all = yield* repo.instances(company.id, ids)
        const uses = yield* repo.usesCounts(company.id, all.map((r) => r.id))
        const items = ids.flatMap((id) => {
          const group = groups.find((g) => g.id === id)
          const rows = all.filter((r) => r.group_id === id)
          return group === undefined || rows.length === 0 ? [] : [toTemplate(group, rows[0], rows, uses)]
        })
        const answer: ListAnswer = { items, pagination: pageInfo(page, perPage, total) }
        if (q.includeFacets !== "true" && q.includeFacets !== "1") return answer
        const facets = otherType ? { statuses: {}, languages: {}, total: 0 } : yield* repo.facets(company.id, filters)
        return {
          ...answer,
          facets: {
            statuses: facets.statuses,
            languages: facets.languages,
            channel_types: facets.total === 0 ? {} : { [templateChannelType.key]: facets.total }
          }
        }
      })

      const channelTypes = Effect.as(requirePermission("template.view"), [templateChannelType]).pipe(
        Effect.withSpan("Templates.channelTypes")
      )

      const get = Effect.fn("Templates.get")(function*(id: number) {
        const company = yield* requirePermission("template.view")
        const { group, instanceId, all } = yield* load(company.id, id)
        const uses = yield* repo.usesCounts(company.id, all.map((r) => r.id))
        return toTemplate(group, shown(instanceId, all), all, uses)
      })

      /** The channel's provider-side ids (phone number and business account), never its secrets. */
      const externalIds = (companyId: CompanyId, c: BusinessChannel) => {
        const creds = contextOf(companyId, c).credentials
        return [creds.phone_number_id, creds.business_account_id].filter((v): v is string => v !== undefined)
      }

      const availability = (companyId: CompanyId, language: string, all: ReadonlyArray<InstanceRow>, channels: ReadonlyArray<BusinessChannel>, group: GroupRow) =>
        channels.map((c): Availability => {
          const row = all.find((r) => r.channel_id === c.id && r.language === language)
          return {
            channel: { id: c.id, name: c.name, account_name: c.account_name, status: c.status, external_ids: externalIds(companyId, c) },
            template: row === undefined ? null : {
              id: row.id,
              external_id: row.external_id,
              status: group.status,
              meta_status: row.meta_status,
              meta_status_reason: row.meta_status_reason,
              last_synced_at: iso(row.last_synced_at)
            },
            availability: row === undefined ? "not_added" : "added"
          }
        })

      const channels = Effect.fn("Templates.channels")(function*(id: number) {
        const company = yield* requirePermission("template.view")
        const { group, instanceId, all } = yield* load(company.id, id)
        return availability(company.id, shown(instanceId, all).language, all, yield* repo.businessChannels(company.id), group)
      })

      const eventsOf = Effect.fn("Templates.events")(function*(id: number) {
        const company = yield* requirePermission("template.view")
        const { group } = yield* load(company.id, id)
        const rows = yield* repo.events(company.id, group.id)
        return rows.map((e): TemplateEvent => ({
          id: e.id,
          type: e.type,
          template_id: e.template_id,
          language: e.language,
          meta_status: e.meta_status,
          reason: e.reason,
          metadata: e.metadata,
          channel: e.channel_id === null || e.channel_name === null
            ? null
            : { id: e.channel_id, name: e.channel_name, account_name: e.channel_account_name },
          actor: e.actor_id === null ? null : { id: e.actor_id, name: e.actor_name ?? "" },
          created_at: e.created_at.toISOString()
        }))
      })

      // ------------------------------------------------------------ writing

      const freeSlug = Effect.fnUntraced(function*(companyId: CompanyId, name: string) {
        const base = slugify(name)
        const taken = yield* repo.slugsLike(companyId, base)
        if (!taken.has(base)) return base
        let n = 2
        while (taken.has(`${base}_${n}`)) n++
        return `${base}_${n}`
      })

      const create = Effect.fn("Templates.create")(function*(input: CreateTemplate) {
        const company = yield* requirePermission("template.create")
        const actor = yield* CurrentActor
        if (input.channel_type !== undefined && input.channel_type !== templateChannelType.key) {
          return yield* invalidField("channel_type", `Templates can only be created for ${templateChannelType.key} channels.`)
        }
        const content = contentOf(input, null)
        yield* checkContent(content)
        const channelIds = yield* businessChannels(company.id, input.channel_ids ?? [], "channel_ids")
        const language = input.language.trim()
        const groupId = yield* transaction(Effect.gen(function*() {
          const slug = input.slug ?? (yield* freeSlug(company.id, input.name))
          const inserted = yield* repo.insertGroup(company.id, input.name.trim(), slug)
          if (Option.isNone(inserted)) return yield* invalidField("slug", "The slug has already been taken.")
          const groupId = inserted.value
          const targets = channelIds.length === 0 ? [null] : channelIds
          for (const channelId of targets) yield* repo.insertInstance(company.id, groupId, channelId, language, content)
          yield* record(company.id, groupId, "created", { actorUserId: actor.userId, metadata: { language, channel_ids: channelIds } })
          return groupId
        }))
        return { message: "Template created.", template: yield* render(company.id, groupId, null) }
      })

      const editable = (group: GroupRow) =>
        group.status === "draft"
          ? Effect.void
          : Effect.fail(ruleViolation("template_not_draft", `Only draft templates can be edited; this one is ${group.status}.`))

      const update = Effect.fn("Templates.update")(function*(id: number, input: UpdateTemplate) {
        const company = yield* requirePermission("template.update")
        const { group, instanceId, all } = yield* load(company.id, id)
        yield* editable(group)
        const row = shown(instanceId, all)
        const { name, ...fields } = input
        const content = contentOf(fields, contentFrom(row))
        yield* checkContent(content)
        yield* transaction(Effect.gen(function*() {
          yield* repo.updateGroup(company.id, group.id, name === undefined ? {} : { name: name.trim() })
          yield* repo.updateContent(company.id, group.id, row.language, content)
          yield* events.emit(company.id, "template.updated", { template_group_id: group.id, template_id: row.id, language: row.language })
        }))
        return yield* render(company.id, group.id, row.id)
      })

      const assignChannels = Effect.fn("Templates.assignChannels")(function*(id: number, input: AssignChannels) {
        const company = yield* requirePermission("template.update")
        const actor = yield* CurrentActor
        const { group, instanceId, all } = yield* load(company.id, id)
        if (group.status === "archived") return yield* ruleViolation("template_archived", "An archived template takes no new channels.")
        const channelIds = yield* businessChannels(company.id, input.channel_ids, "channel_ids")
        const added = yield* transaction(Effect.gen(function*() {
          const locked = yield* orNotFound(yield* repo.lockGroup(company.id, group.id))
          const current = yield* repo.instances(company.id, [locked.id])
          const created: Array<number> = []
          for (const language of languagesOf(current)) {
            const ofLanguage = current.filter((r) => r.language === language)
            const unassigned = ofLanguage.filter((r) => r.channel_id === null)
            const content = contentFrom(ofLanguage[0])
            for (const channelId of channelIds) {
              if (ofLanguage.some((r) => r.channel_id === channelId)) continue
              const spare = unassigned.shift()
              if (spare !== undefined) {
                yield* repo.setChannel(company.id, spare.id, channelId)
                created.push(spare.id)
              } else {
                created.push(yield* repo.insertInstance(company.id, locked.id, channelId, language, content))
              }
            }
          }
          for (const channelId of channelIds) {
            if (current.some((r) => r.channel_id === channelId)) continue
            yield* record(company.id, locked.id, "channel_added", { channelId, actorUserId: actor.userId })
          }
          return created
        }))
        const now = yield* repo.instances(company.id, [group.id])
        if (group.status === "published") {
          yield* moderation.submitInstances(company.id, group, now.filter((r) => added.includes(r.id)), actor.userId)
        }
        const after = yield* repo.instances(company.id, [group.id])
        const [fresh] = yield* repo.groups(company.id, [group.id])
        const items = availability(company.id, shown(instanceId, after).language, after, yield* repo.businessChannels(company.id, channelIds), fresh)
        return { message: added.length === 0 ? "The channels were already assigned." : "Channels assigned.", items }
      })

      const versions = Effect.fnUntraced(function*(companyId: CompanyId, groupId: number) {
        const [group] = yield* repo.groups(companyId, [groupId])
        return versionsOf(group, yield* repo.instances(companyId, [groupId]))
      })

      const addLanguage = Effect.fn("Templates.addLanguage")(function*(id: number, input: AddLanguage) {
        const company = yield* requirePermission("template.update")
        const actor = yield* CurrentActor
        const { group, all } = yield* load(company.id, id)
        const language = input.language.trim()
        if (all.some((r) => r.language === language)) {
          return yield* invalidField("language", `The template already has a ${language} version.`)
        }
        const channelIds = [...new Set(all.flatMap((r) => r.channel_id === null ? [] : [r.channel_id]))]
        if (channelIds.length === 0) {
          return yield* invalidField("language", "Assign a channel to the template before adding a language.")
        }
        const { language: _, ...fields } = input
        const content = contentOf(fields, null)
        yield* checkContent(content)
        yield* transaction(Effect.gen(function*() {
          yield* repo.lockGroup(company.id, group.id)
          const current = yield* repo.instances(company.id, [group.id])
          if (current.some((r) => r.language === language)) {
            return yield* invalidField("language", `The template already has a ${language} version.`)
          }
          for (const channelId of channelIds) yield* repo.insertInstance(company.id, group.id, channelId, language, content)
          yield* record(company.id, group.id, "language_added", { actorUserId: actor.userId, metadata: { language } })
        }))
        return yield* versions(company.id, group.id)
      })

      const deleteLanguage = Effect.fn("Templates.deleteLanguage")(function*(id: number, language: string) {
        const company = yield* requirePermission("template.update")
        const { group, all } = yield* load(company.id, id)
        const rows = all.filter((r) => r.language === language)
        if (rows.length === 0) return yield* notFound("Language version not found.")
        if (languagesOf(all).length === 1) return yield* invalidField("language", "The only language of a template cannot be deleted.")
        yield* moderation.withdraw(company.id, group.slug, rows)
        yield* transaction(Effect.gen(function*() {
          yield* repo.deleteInstances(company.id, rows.map((r) => r.id))
          yield* repo.updateGroup(company.id, group.id, {})
          yield* events.emit(company.id, "template.updated", { template_group_id: group.id, language, change: "language_deleted" })
        }))
        return yield* versions(company.id, group.id)
      })

      const remove = Effect.fn("Templates.remove")(function*(id: number) {
        const company = yield* requirePermission("template.delete")
        const { group, all } = yield* load(company.id, id)
        yield* moderation.withdraw(company.id, group.slug, all)
        yield* transaction(Effect.gen(function*() {
          yield* repo.deleteGroup(company.id, group.id)
          yield* events.emit(company.id, "template.deleted", { template_group_id: group.id, instance_ids: all.map((r) => r.id) })
        }))
      })

      const setStatus = Effect.fnUntraced(function*(companyId: CompanyId, group: GroupRow, status: GroupRow["status"], type: string, instanceId: number | null) {
        const actor = yield* CurrentActor
        yield* transaction(Effect.gen(function*() {
          yield* repo.updateGroup(companyId, group.id, { status })
          yield* record(companyId, group.id, type, { actorUserId: actor.userId, metadata: { from: group.status, to: status } })
        }))
        return yield* render(companyId, group.id, instanceId)
      })

      const publish = Effect.fn("Templates.publish")(function*(id: number) {
        const company = yield* requirePermission("template.update")
        const { group, instanceId, all } = yield* load(company.id, id)
        if (group.status === "archived") return yield* ruleViolation("template_archived", "Unarchive the template before publishing it.")
        if (!all.some((r) => r.meta_status === "approved")) {
          return yield* ruleViolation("template_not_approved", "Only a template approved by the provider can be published.")
        }
        if (group.status === "published") return yield* render(company.id, group.id, instanceId)
        return yield* setStatus(company.id, group, "published", "published", instanceId)
      })

      const archive = Effect.fn("Templates.archive")(function*(id: number) {
        const company = yield* requirePermission("template.update")
        const { group, instanceId } = yield* load(company.id, id)
        if (group.status === "archived") return yield* render(company.id, group.id, instanceId)
        return yield* setStatus(company.id, group, "archived", "archived", instanceId)
      })

      const unarchive = Effect.fn("Templates.unarchive")(function*(id: number) {
        const company = yield* requirePermission("template.update")
        const { group, instanceId, all } = yield* load(company.id, id)
        if (group.status !== "archived") return yield* ruleViolation("template_not_archived", "The template is not archived.")
        const next = all.some((r) => r.meta_status === "approved") ? "published" : "draft"
        return yield* setStatus(company.id, group, next, "unarchived", instanceId)
      })

      return Templates.of({
        list,
        channelTypes,
        get,
        channels,
        events: eventsOf,
        create,
        update,
        assignChannels,
        addLanguage,
        deleteLanguage,
        remove,
        publish,
        archive,
        unarchive
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(Moderation.layerNoDeps), Layer.provide(TemplatesRepo.layer))
}

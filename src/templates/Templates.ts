import { Context, Effect, Exit, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { type CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { Credentials } from "../providers/Credentials.ts"
import { type ChannelContext, type ModerationStatus, type ProviderTemplate, Providers } from "../providers/Provider.ts"
import { channelContext } from "../providers/Rules.ts"
import {
  type Forbidden,
  invalidField,
  invalidFields,
  type NotFound,
  notFound,
  ruleViolation,
  type Unprocessable, orNotFound } from "../platform/Errors.ts"
import { offsetOf, pageInfo } from "../platform/Pagination.ts"
import {
  type AddLanguage,
  type AssignChannels,
  type Availability,
  type CreateTemplate,
  type ListParams,
  type MetaStatus,
  type ModerationResult,
  type SandboxTemplateStatus,
  type Template,
  type TemplateEvent,
  templateChannelType,
  type UpdateTemplate,
  type Version
} from "./Domain.ts"
import { type BusinessChannel, type Content, type GroupRow, type InstanceRow, TemplatesRepo } from "./Repo.ts"
import { contentErrors, contentOf, slugify, variablesIn } from "./Rules.ts"

type Denied = Forbidden | NotFound

const templateNotFound = () => notFound("Template not found.")
const iso = (d: Date | null) => d === null ? null : d.toISOString()

/** The template event type a provider verdict writes. */
const verdictEvent: Record<ModerationStatus, string> = {
  pending: "meta_pending",
  approved: "meta_approved",
  rejected: "meta_rejected",
  paused: "meta_paused",
  disabled: "meta_disabled"
}

const contentFrom = (row: InstanceRow): Content => ({
  category: row.category,
  body: row.body,
  parameters: row.parameters,
  header_enabled: row.header_enabled,
  header_type: row.header_type,
  header_text: row.header_text,
  footer_enabled: row.footer_enabled,
  footer_text: row.footer_text,
  buttons_enabled: row.buttons_enabled,
  buttons: row.buttons,
  labels: row.labels
})

const languagesOf = (rows: ReadonlyArray<InstanceRow>) => [...new Set(rows.map((r) => r.language))]

const versionsOf = (group: GroupRow, rows: ReadonlyArray<InstanceRow>): ReadonlyArray<Version> =>
  rows.map((r) => ({ id: r.id, language: r.language, channel_id: r.channel_id, status: group.status, meta_status: r.meta_status }))

/** One instance as the API shows it, with its group's aggregate. */
const toTemplate = (group: GroupRow, row: InstanceRow, all: ReadonlyArray<InstanceRow>, uses: ReadonlyMap<number, number>): Template => {
  const counts: Record<string, number> = {}
  for (const r of all) counts[r.meta_status] = (counts[r.meta_status] ?? 0) + 1
  const statuses = Object.keys(counts)
  const sameLanguage = all.filter((r) => r.language === row.language && r.channel_id !== null && r.channel_name !== null)
  return {
    id: row.id,
    company_id: row.company_id,
    template_group_id: group.id,
    channel_type: templateChannelType,
    channel: row.channel_id === null || row.channel_name === null
      ? null
      : { id: row.channel_id, name: row.channel_name, account_name: row.channel_account_name },
    name: group.name,
    slug: group.slug,
    language: row.language,
    status: group.status,
    meta_status: row.meta_status,
    meta_status_reason: row.meta_status_reason,
    last_synced_at: iso(row.last_synced_at),
    external_id: row.external_id,
    ...contentFrom(row),
    uses_count: uses.get(row.id) ?? 0,
    logical_template: {
      instances_count: all.length,
      assigned_channels_count: new Set(all.flatMap((r) => r.channel_id === null ? [] : [r.channel_id])).size,
      uses_count: all.reduce((n, r) => n + (uses.get(r.id) ?? 0), 0),
      languages: languagesOf(all),
      channels: sameLanguage.map((r) => ({
        id: r.channel_id!,
        name: r.channel_name!,
        account_name: r.channel_account_name,
        meta_status: r.meta_status,
        meta_status_reason: r.meta_status_reason,
        last_synced_at: iso(r.last_synced_at)
      })),
      meta_status_counts: counts,
      meta_overall_status: statuses.length === 1 ? statuses[0] : statuses.length === 0 ? "local" : "mixed"
    },
    versions: versionsOf(group, all),
    created_at: row.created_at.toISOString(),
    updated_at: (row.updated_at > group.updated_at ? row.updated_at : group.updated_at).toISOString()
  }
}

/** What the provider reviews for one instance. */
const providerTemplate = (slug: string, row: InstanceRow): ProviderTemplate => {
  const examples = (text: string | null) =>
    variablesIn(text).map((name) => ({ name, value: row.parameters.find((p) => p.name === name)?.sample_value ?? "" }))
  const header = row.header_enabled && row.header_text !== null ? row.header_text : null
  return {
    name: slug,
    language: row.language,
    category: row.category,
    header: header === null ? null : { text: header, examples: examples(header) },
    body: { text: row.body, examples: examples(row.body) },
    footer: row.footer_enabled ? row.footer_text : null,
    buttons: row.buttons_enabled ? row.buttons.map((b) => ({ type: b.type, label: b.label, value: b.value })) : []
  }
}

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
  submit(id: number): Effect.Effect<{ readonly message: string; readonly template: Template; readonly results: ReadonlyArray<ModerationResult> }, Denied | Unprocessable, CurrentActor>
  publish(id: number): Effect.Effect<Template, Denied | Unprocessable, CurrentActor>
  archive(id: number): Effect.Effect<Template, Denied | Unprocessable, CurrentActor>
  unarchive(id: number): Effect.Effect<Template, Denied | Unprocessable, CurrentActor>
  readonly sync: Effect.Effect<{ readonly message: string; readonly checked: number; readonly changed: number; readonly results: ReadonlyArray<ModerationResult> }, Forbidden, CurrentActor>
  sandboxStatus(channelId: number, input: SandboxTemplateStatus): Effect.Effect<Template, Denied | Unprocessable, CurrentActor>
  /** A provider's notification about an instance on one of its channels (no actor). */
  providerVerdict(channel: ChannelContext, verdict: { readonly externalId: string; readonly status: ModerationStatus; readonly reason: string | null }): Effect.Effect<void>
}>()("crm/templates/Templates") {
  static readonly layerNoDeps = Layer.effect(
    Templates,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* TemplatesRepo
      const events = yield* Events
      const providers = yield* Providers
      const credentials = yield* Credentials

      const contextOf = (companyId: CompanyId, c: {
        readonly id: number
        readonly type: BusinessChannel["type"]
        readonly provider: BusinessChannel["provider"]
        readonly status: BusinessChannel["status"]
        readonly credentials: Uint8Array | null
        readonly settings: Record<string, unknown>
      }) => channelContext(credentials, companyId, c)

      const instanceContext = (companyId: CompanyId, row: InstanceRow) =>
        row.channel_id === null || row.channel_type === null || row.provider === null || row.channel_status === null
          ? null
          : contextOf(companyId, {
            id: row.channel_id,
            type: row.channel_type,
            provider: row.provider,
            status: row.channel_status,
            credentials: row.credentials,
            settings: row.settings ?? {}
          })

      /** A template event row and its system event, in the caller's transaction. */
      const record = Effect.fnUntraced(function*(companyId: CompanyId, groupId: number, type: string, e: {
        readonly templateId?: number | null
        readonly channelId?: number | null
        readonly metaStatus?: string | null
        readonly reason?: string | null
        readonly metadata?: Record<string, unknown>
        readonly actorUserId: number | null
      }) {
        const event = {
          groupId,
          type,
          templateId: e.templateId ?? null,
          channelId: e.channelId ?? null,
          metaStatus: e.metaStatus ?? null,
          reason: e.reason ?? null,
          metadata: e.metadata ?? {},
          actorUserId: e.actorUserId
        }
        yield* repo.insertEvent(companyId, event)
        yield* events.emit(companyId, `template.${type}`, {
          template_group_id: groupId,
          template_id: event.templateId,
          channel_id: event.channelId,
          type,
          meta_status: event.metaStatus,
          reason: event.reason,
          metadata: event.metadata,
          actor_id: event.actorUserId
        })
      })

      const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) => sql.withTransaction(effect).pipe(Effect.catchTag("SqlError", Effect.die))

      /** The group an id names (group or instance id) with every instance; 404 for another company's. */
      const load = Effect.fnUntraced(function*(companyId: CompanyId, id: number) {
        const found = yield* repo.resolve(companyId, id)
        if (Option.isNone(found)) return yield* templateNotFound()
        const all = yield* repo.instances(companyId, [found.value.group.id])
        return { group: found.value.group, instanceId: found.value.instanceId, all }
      })

      /** The instance an id shows: that instance, else the group's first. */
      const shown = (instanceId: number | null, all: ReadonlyArray<InstanceRow>) =>
        all.find((r) => r.id === instanceId) ?? all[0]

      const render = Effect.fnUntraced(function*(companyId: CompanyId, groupId: number, instanceId: number | null) {
        const [group] = yield* repo.groups(companyId, [groupId])
        const all = yield* repo.instances(companyId, [groupId])
        const uses = yield* repo.usesCounts(companyId, all.map((r) => r.id))
        return toTemplate(group, shown(instanceId, all), all, uses)
      })

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

      /** Sends instances to their provider's review; each outcome is written on its own. */
      const submitRows = Effect.fnUntraced(function*(companyId: CompanyId, group: GroupRow, rows: ReadonlyArray<InstanceRow>, actorUserId: number | null) {
        const results: Array<ModerationResult> = []
        for (const row of rows) {
          const channel = instanceContext(companyId, row)
          if (channel === null) continue
          const outcome = yield* Effect.exit(
            providers.forChannel(channel).submitTemplate(channel, providerTemplate(group.slug, row), row.external_id)
          )
          if (Exit.isFailure(outcome)) {
            const error = Option.match(Exit.findErrorOption(outcome), { onNone: () => "The provider call failed.", onSome: (e) => e.message })
            results.push({ template_id: row.id, channel_id: row.channel_id, language: row.language, meta_status: row.meta_status, meta_status_reason: row.meta_status_reason, error })
            continue
          }
          const verdict = outcome.value
          yield* transaction(Effect.gen(function*() {
            yield* repo.setModeration(companyId, row.id, { metaStatus: verdict.status, reason: verdict.reason, externalId: verdict.externalId, synced: true })
            yield* record(companyId, group.id, "submitted", { templateId: row.id, channelId: row.channel_id, metaStatus: verdict.status, actorUserId })
          }))
          results.push({ template_id: row.id, channel_id: row.channel_id, language: row.language, meta_status: verdict.status, meta_status_reason: verdict.reason, error: null })
        }
        return results
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
          yield* submitRows(company.id, group, now.filter((r) => added.includes(r.id)), actor.userId)
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

      /** Removes instances from their provider, best effort: a provider that refuses is left as it is. */
      const forget = Effect.fnUntraced(function*(companyId: CompanyId, slug: string, rows: ReadonlyArray<InstanceRow>) {
        for (const row of rows) {
          const channel = instanceContext(companyId, row)
          if (channel === null || row.external_id === null) continue
          const ref = { externalId: row.external_id, name: slug, language: row.language, status: row.meta_status === "local" ? "pending" as const : row.meta_status }
          yield* providers.forChannel(channel).deleteTemplate(channel, ref).pipe(
            Effect.catch((e) => Effect.logWarning("template removal at the provider failed", e))
          )
        }
      })

      const deleteLanguage = Effect.fn("Templates.deleteLanguage")(function*(id: number, language: string) {
        const company = yield* requirePermission("template.update")
        const { group, all } = yield* load(company.id, id)
        const rows = all.filter((r) => r.language === language)
        if (rows.length === 0) return yield* notFound("Language version not found.")
        if (languagesOf(all).length === 1) return yield* invalidField("language", "The only language of a template cannot be deleted.")
        yield* forget(company.id, group.slug, rows)
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
        yield* forget(company.id, group.slug, all)
        yield* transaction(Effect.gen(function*() {
          yield* repo.deleteGroup(company.id, group.id)
          yield* events.emit(company.id, "template.deleted", { template_group_id: group.id, instance_ids: all.map((r) => r.id) })
        }))
      })

      const submit = Effect.fn("Templates.submit")(function*(id: number) {
        const company = yield* requirePermission("template.update")
        const actor = yield* CurrentActor
        const { group, instanceId, all } = yield* load(company.id, id)
        if (group.status === "archived") return yield* ruleViolation("template_archived", "Unarchive the template before submitting it.")
        const assigned = all.filter((r) => r.channel_id !== null && r.channel_name !== null)
        if (assigned.length === 0) {
          return yield* ruleViolation("no_channel_assigned", "Assign a channel to the template before submitting it.")
        }
        const results = yield* submitRows(company.id, group, assigned, actor.userId)
        const failed = results.filter((r) => r.error !== null).length
        return {
          message: failed === 0 ? "Template submitted for review." : `${results.length - failed} of ${results.length} submitted; see results.`,
          template: yield* render(company.id, group.id, instanceId),
          results
        }
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

      /** Writes a provider verdict when it changes something, with its event (no actor: the provider decided). */
      const applyVerdict = Effect.fnUntraced(function*(companyId: CompanyId, row: InstanceRow, status: MetaStatus, reason: string | null) {
        const changed = row.meta_status !== status || (status === "rejected" && row.meta_status_reason !== reason)
        yield* transaction(Effect.gen(function*() {
          yield* repo.setModeration(companyId, row.id, { metaStatus: status, reason, synced: true })
          if (changed && status !== "local") {
            yield* record(companyId, row.group_id, verdictEvent[status], {
              templateId: row.id,
              channelId: row.channel_id,
              metaStatus: status,
              reason,
              actorUserId: null
            })
          }
        }))
        return changed
      })

      const sync = Effect.gen(function*() {
        const company = yield* requirePermission("template.update")
        const rows = yield* repo.submitted(company.id)
        const groups = new Map((yield* repo.groups(company.id, [...new Set(rows.map((r) => r.group_id))])).map((g) => [g.id, g]))
        const byChannel = new Map<number, Array<InstanceRow>>()
        for (const row of rows) byChannel.set(row.channel_id!, [...(byChannel.get(row.channel_id!) ?? []), row])
        const results: Array<ModerationResult> = []
        let changed = 0
        for (const channelRows of byChannel.values()) {
          const channel = instanceContext(company.id, channelRows[0])!
          const refs = channelRows.map((r) => ({
            externalId: r.external_id!,
            name: groups.get(r.group_id)!.slug,
            language: r.language,
            status: r.meta_status === "local" ? "pending" as const : r.meta_status
          }))
          const answer = yield* Effect.exit(providers.forChannel(channel).templateStatuses(channel, refs))
          for (const row of channelRows) {
            if (Exit.isFailure(answer)) {
              const error = Option.match(Exit.findErrorOption(answer), { onNone: () => "The provider call failed.", onSome: (e) => e.message })
              results.push({ template_id: row.id, channel_id: row.channel_id, language: row.language, meta_status: row.meta_status, meta_status_reason: row.meta_status_reason, error })
              continue
            }
            const verdict = answer.value.find((v) => v.externalId === row.external_id)
            // A template edited since its submission stays local until it is submitted again.
            if (verdict === undefined || row.meta_status === "local") {
              results.push({ template_id: row.id, channel_id: row.channel_id, language: row.language, meta_status: row.meta_status, meta_status_reason: row.meta_status_reason, error: null })
              continue
            }
            if (yield* applyVerdict(company.id, row, verdict.status, verdict.reason)) changed++
            results.push({ template_id: row.id, channel_id: row.channel_id, language: row.language, meta_status: verdict.status, meta_status_reason: verdict.reason, error: null })
          }
        }
        return { message: "Templates synchronized.", checked: rows.length, changed, results }
      }).pipe(Effect.withSpan("Templates.sync"))

      const sandboxStatus = Effect.fn("Templates.sandboxStatus")(function*(channelId: number, input: SandboxTemplateStatus) {
        const company = yield* requirePermission("template.update")
        const [channel] = yield* repo.businessChannels(company.id, [channelId])
        if (channel === undefined) return yield* notFound("Channel not found.")
        if (channel.provider !== "sandbox") return yield* ruleViolation("channel_not_sandbox", "Only sandbox channels take simulated template verdicts.")
        const row = yield* repo.instance(company.id, input.template_id)
        if (Option.isNone(row) || row.value.channel_id !== channelId) {
          return yield* invalidField("template_id", "The template is not an instance on this channel.")
        }
        // An instance edited since its submission awaits a new one: a verdict on the old content does not apply.
        if (row.value.external_id === null || row.value.meta_status === "local") {
          return yield* invalidField("template_id", "The template has not been submitted for review.")
        }
        yield* applyVerdict(company.id, row.value, input.meta_status, input.reason ?? null)
        return yield* render(company.id, row.value.group_id, row.value.id)
      })

      const providerVerdict = Effect.fn("Templates.providerVerdict")(function*(channel: ChannelContext, verdict: {
        readonly externalId: string
        readonly status: ModerationStatus
        readonly reason: string | null
      }) {
        const companyId = channel.companyId as CompanyId
        const row = yield* repo.byExternal(companyId, channel.id, verdict.externalId)
        if (Option.isNone(row) || row.value.meta_status === "local") return
        yield* applyVerdict(companyId, row.value, verdict.status, verdict.reason)
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
        submit,
        publish,
        archive,
        unarchive,
        sync,
        sandboxStatus,
        providerVerdict
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(TemplatesRepo.layer))
}

import { Context, Effect, Exit, Layer, Option } from "effect"
import { type CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { type ChannelContext, type ModerationStatus, type ProviderError, Providers, type TemplatePage } from "../providers/Provider.ts"
import { Jobs } from "../platform/Jobs.ts"
import { type Forbidden, invalidField, type NotFound, notFound, ruleViolation, type Unprocessable } from "../platform/Errors.ts"
import type { MetaStatus, ModerationResult, SandboxTemplateStatus, SyncStarted, Template } from "./Domain.ts"
import { TemplateSyncJob } from "./Kinds.ts"
import { makeTemplateKit } from "./Kit.ts"
import { providerTemplate } from "./Render.ts"
import { type GroupRow, type InstanceRow, TemplatesRepo } from "./Repo.ts"

type Denied = Forbidden | NotFound

/** Templates asked of a provider per page of its list. */
export const syncPageSize = 100

/** The template event type a provider verdict writes. */
const verdictEvent: Record<ModerationStatus, string> = {
  pending: "meta_pending",
  approved: "meta_approved",
  rejected: "meta_rejected",
  paused: "meta_paused",
  disabled: "meta_disabled"
}

const failureOf = (exit: Exit.Failure<unknown, { readonly message: string }>) =>
  Option.match(Exit.findErrorOption(exit), { onNone: () => "The provider call failed.", onSome: (e) => e.message })

/** An instance's outcome as it stands, with the provider's refusal when there is one. */
const resultOf = (row: InstanceRow, error: string | null = null): ModerationResult => ({
  template_id: row.id,
  channel_id: row.channel_id,
  language: row.language,
  meta_status: row.meta_status,
  meta_status_reason: row.meta_status_reason,
  error
})

export interface Verdict {
  readonly externalId: string
  readonly status: ModerationStatus
  readonly reason: string | null
}

/**
 * Provider moderation of template instances: submission for review, the provider's verdicts (sync,
 * webhook, the sandbox's simulated reviewer), each change written with its `template.meta_*` event.
 */
export class Moderation extends Context.Service<Moderation, {
  submit(id: number): Effect.Effect<{ readonly message: string; readonly template: Template; readonly results: ReadonlyArray<ModerationResult> }, Denied | Unprocessable, CurrentActor>
  /** Sends instances to their provider's review; each outcome is written on its own. */
  submitInstances(companyId: CompanyId, group: GroupRow, rows: ReadonlyArray<InstanceRow>, actorUserId: number | null): Effect.Effect<ReadonlyArray<ModerationResult>>
  /** Removes instances from their provider, best effort: a provider that refuses is left as it is. */
  withdraw(companyId: CompanyId, slug: string, rows: ReadonlyArray<InstanceRow>): Effect.Effect<void>
  /** Queues the company's sync (`Job.ts`), unless one is queued already; it does not wait for it. */
  readonly sync: Effect.Effect<SyncStarted, Forbidden, CurrentActor>
  /** The channels with submitted instances: what a sync reads. */
  syncChannels(companyId: CompanyId): Effect.Effect<ReadonlyArray<number>>
  /** Reads one channel's template list and applies the verdicts that change something. */
  syncChannel(companyId: CompanyId, channelId: number): Effect.Effect<{ readonly checked: number; readonly changed: number }, ProviderError>
  sandboxStatus(channelId: number, input: SandboxTemplateStatus): Effect.Effect<Template, Denied | Unprocessable, CurrentActor>
  /** A provider's notification about an instance on one of its channels (no actor). */
  providerVerdict(channel: ChannelContext, verdict: Verdict): Effect.Effect<void>
  /** Writes a provider verdict when it changes something, with its event; true when it did. */
  applyVerdict(companyId: CompanyId, row: InstanceRow, status: MetaStatus, reason: string | null): Effect.Effect<boolean>
}>()("crm/templates/Moderation") {
  static readonly layerNoDeps = Layer.effect(
    Moderation,
    Effect.gen(function*() {
      const kit = yield* makeTemplateKit
      const { repo, instanceContext, record, transaction } = kit
      const providers = yield* Providers
      const jobs = yield* Jobs

      const submitInstances = Effect.fnUntraced(function*(companyId: CompanyId, group: GroupRow, rows: ReadonlyArray<InstanceRow>, actorUserId: number | null) {
        const results: Array<ModerationResult> = []
        for (const row of rows) {
          const channel = instanceContext(companyId, row)
          if (channel === null) continue
          const outcome = yield* Effect.exit(
            providers.forChannel(channel).submitTemplate(channel, providerTemplate(group.slug, row), row.external_id)
          )
          if (Exit.isFailure(outcome)) {
            results.push(resultOf(row, failureOf(outcome)))
            continue
          }
          const verdict = outcome.value
          yield* transaction(Effect.gen(function*() {
            yield* repo.setModeration(companyId, row.id, { metaStatus: verdict.status, reason: verdict.reason, externalId: verdict.externalId, synced: true })
            yield* record(companyId, group.id, "submitted", { templateId: row.id, channelId: row.channel_id, metaStatus: verdict.status, actorUserId })
          }))
          results.push({ ...resultOf(row), meta_status: verdict.status, meta_status_reason: verdict.reason })
        }
        return results
      })

      const submit = Effect.fn("Moderation.submit")(function*(id: number) {
        const company = yield* requirePermission("template.update")
        const actor = yield* CurrentActor
        const { group, instanceId, all } = yield* kit.load(company.id, id)
        if (group.status === "archived") return yield* ruleViolation("template_archived", "Unarchive the template before submitting it.")
        const assigned = all.filter((r) => r.channel_id !== null && r.channel_name !== null)
        if (assigned.length === 0) {
          return yield* ruleViolation("no_channel_assigned", "Assign a channel to the template before submitting it.")
        }
        const results = yield* submitInstances(company.id, group, assigned, actor.userId)
        const failed = results.filter((r) => r.error !== null).length
        return {
          message: failed === 0 ? "Template submitted for review." : `${results.length - failed} of ${results.length} submitted; see results.`,
          template: yield* kit.render(company.id, group.id, instanceId),
          results
        }
      })

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

      /**
       * One channel's submitted instances against its account's template list, read a page at a time.
       * A template the provider no longer lists is left as it is.
       */
      const syncChannel = Effect.fnUntraced(function*(companyId: CompanyId, channelId: number) {
        const rows = yield* repo.submitted(companyId, channelId)
        const channel = rows.length === 0 ? null : instanceContext(companyId, rows[0])
        if (channel === null) return { checked: 0, changed: 0 }
        const byExternal = new Map(rows.map((r) => [r.external_id!, r]))
        const adapter = providers.forChannel(channel)
        let changed = 0
        let after: string | null = null
        do {
          const page: TemplatePage = yield* adapter.templatePage(channel, { limit: syncPageSize, after })
          for (const listed of page.templates) {
            const row = byExternal.get(listed.externalId)
            // A template edited since its submission stays local until it is submitted again.
            if (row === undefined || row.meta_status === "local") continue
            if (yield* applyVerdict(companyId, row, listed.status, listed.reason)) changed++
          }
          // A cursor that does not move would page forever.
          after = page.after === after ? null : page.after
        } while (after !== null)
        return { checked: rows.length, changed }
      })

      const syncChannels = (companyId: CompanyId) =>
        Effect.map(repo.submitted(companyId), (rows) => [...new Set(rows.map((r) => r.channel_id!))])

      const sync = Effect.gen(function*() {
        const company = yield* requirePermission("template.update")
        const { queued } = yield* jobs.enqueueOnce(TemplateSyncJob, company.id, {})
        return { message: "Template sync started.", already_queued: !queued }
      }).pipe(Effect.withSpan("Moderation.sync"))

      /** Removes instances from their provider, best effort: a provider that refuses is left as it is. */
      const withdraw = Effect.fnUntraced(function*(companyId: CompanyId, slug: string, rows: ReadonlyArray<InstanceRow>) {
        for (const row of rows) {
          const channel = instanceContext(companyId, row)
          if (channel === null || row.external_id === null) continue
          const ref = { externalId: row.external_id, name: slug, language: row.language, status: row.meta_status === "local" ? "pending" as const : row.meta_status }
          yield* providers.forChannel(channel).deleteTemplate(channel, ref).pipe(
            Effect.catch((e) => Effect.logWarning("template removal at the provider failed", e))
          )
        }
      })

      const sandboxStatus = Effect.fn("Moderation.sandboxStatus")(function*(channelId: number, input: SandboxTemplateStatus) {
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
        return yield* kit.render(company.id, row.value.group_id, row.value.id)
      })

      const providerVerdict = Effect.fn("Moderation.providerVerdict")(function*(channel: ChannelContext, verdict: Verdict) {
        const companyId = channel.companyId as CompanyId
        const row = yield* repo.byExternal(companyId, channel.id, verdict.externalId)
        if (Option.isNone(row) || row.value.meta_status === "local") return
        yield* applyVerdict(companyId, row.value, verdict.status, verdict.reason)
      })

      return Moderation.of({ submit, submitInstances, withdraw, sync, syncChannels, syncChannel, sandboxStatus, providerVerdict, applyVerdict })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(TemplatesRepo.layer))
}

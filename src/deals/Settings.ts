import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId, type CurrentActor } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { type FeatureNotAvailable, type Forbidden, invalidField, type Unprocessable, orNotFound } from "../platform/Errors.ts"
import { configure, dealsAccess } from "./Access.ts"
import { type DealSettings, type DealSettingsInput, defaultTitleTemplate } from "./Domain.ts"
import { FunnelsRepo } from "./FunnelsRepo.ts"
import { DealsRepo } from "./Repo.ts"
import { renderTitle } from "./Rules.ts"
import { SettingsRepo } from "./SettingsRepo.ts"
import { TimelineRepo } from "./TimelineRepo.ts"

type Denied = Forbidden | FeatureNotAvailable

/** The company's deal settings (`/v1/company/deal-settings`). */
export class Settings extends Context.Service<Settings, {
  readonly get: Effect.Effect<DealSettings, Denied, CurrentActor>
  update(input: DealSettingsInput): Effect.Effect<DealSettings, Denied | Unprocessable, CurrentActor>
}>()("crm/deals/Settings") {
  static readonly layerNoDeps = Layer.effect(
    Settings,
    Effect.gen(function*() {
      const repo = yield* SettingsRepo
      const funnels = yield* FunnelsRepo
      const sql = yield* SqlClient.SqlClient

      const resolved = Effect.fnUntraced(function*(companyId: CompanyId) {
        const row = yield* repo.find(companyId)
        return {
          auto_create_deal_enabled: row.auto_create_deal_enabled,
          default_funnel_id: row.default_funnel_id,
          default_deal_title_template: row.default_deal_title_template ?? defaultTitleTemplate,
          default_currency: row.default_currency ?? "KZT",
          has_funnels: (yield* funnels.count(companyId)) > 0
        }
      })

      const get = Effect.gen(function*() {
        const company = yield* dealsAccess("deal.view")
        return yield* resolved(company.id)
      }).pipe(Effect.withSpan("Settings.get"))

      const update = Effect.fn("Settings.update")(function*(input: DealSettingsInput) {
        const company = yield* dealsAccess(configure)
        const current = yield* repo.find(company.id, { forUpdate: true })
        if (input.default_funnel_id != null && Option.isNone(yield* funnels.find(company.id, input.default_funnel_id))) {
          return yield* invalidField("default_funnel_id", "The selected default_funnel_id is invalid.")
        }
        const enabled = input.auto_create_deal_enabled ?? current.auto_create_deal_enabled
        if (enabled && input.auto_create_deal_enabled === true && (yield* funnels.count(company.id)) === 0) {
          return yield* invalidField("auto_create_deal_enabled", "Automatic deal creation needs a funnel: create one first.")
        }
        yield* repo.save(company.id, {
          auto_create_deal_enabled: enabled,
          default_funnel_id: input.default_funnel_id !== undefined ? input.default_funnel_id : current.default_funnel_id,
          default_deal_title_template: input.default_deal_title_template !== undefined
            ? input.default_deal_title_template?.trim() ?? null
            : current.default_deal_title_template
        })
        if (input.default_currency !== undefined) yield* repo.setCurrency(company.id, input.default_currency)
        return yield* resolved(company.id)
      }, (effect) => effect.pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die)))

      return Settings.of({ get, update })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([SettingsRepo.layer, FunnelsRepo.layer]))
}

const AutoCreateRepos = Layer.mergeAll(SettingsRepo.layer, FunnelsRepo.layer, DealsRepo.layer, TimelineRepo.layer)

/**
 * Auto-creation of a deal for a conversation's first inbound message, in the caller's
 * transaction (a savepoint when one is open). With `auto_create_deal_enabled`, the deal goes to
 * the default funnel's first open stage, titled from `default_deal_title_template`, with a
 * `system` timeline entry (actor null). The unique index on `deals.conversation_id` makes it
 * at most one deal per conversation, concurrent calls included. Returns the new deal's id.
 */
export const autoCreateForConversation = (
  companyId: CompanyId,
  conversationId: number,
  options: { readonly channelId?: number } = {}
): Effect.Effect<Option.Option<number>, never, SqlClient.SqlClient | Events> =>
  Effect.gen(function*() {
    const settings = yield* SettingsRepo
    const funnels = yield* FunnelsRepo
    const deals = yield* DealsRepo
    const timeline = yield* TimelineRepo
    const events = yield* Events
    const sql = yield* SqlClient.SqlClient
    return yield* Effect.gen(function*() {
      const row = yield* settings.find(companyId)
      if (!row.auto_create_deal_enabled) return Option.none()
      if (yield* settings.hasDeal(companyId, conversationId)) return Option.none()
      const named = row.default_funnel_id === null ? Option.none() : yield* funnels.find(companyId, row.default_funnel_id)
      const funnel = Option.isSome(named) ? named : yield* funnels.fallback(companyId)
      if (Option.isNone(funnel)) return Option.none()
      const stage = yield* funnels.firstOpenStage(companyId, funnel.value.id)
      const conversation = yield* settings.conversation(companyId, conversationId)
      if (Option.isNone(stage) || Option.isNone(conversation)) return Option.none()
      const channelName = yield* settings.channelName(companyId, conversationId, options.channelId)
      const title = renderTitle(row.default_deal_title_template ?? defaultTitleTemplate, {
        contact_name: conversation.value.contact_name,
        channel_name: channelName
      }) || `Deal #${conversationId}`
      const now = new Date(yield* Clock.currentTimeMillis)
      const id = yield* deals.insert(companyId, {
        contact_id: conversation.value.contact_id,
        funnel_id: funnel.value.id,
        funnel_stage_id: stage.value.id,
        conversation_id: conversationId,
        title,
        currency: row.default_currency ?? "KZT",
        source: "auto",
        channel: channelName === "" ? null : channelName,
        responsible_user_id: yield* settings.firstAdmin(companyId),
        stage_changed_at: now
      })
      if (Option.isNone(id)) return Option.none()
      const deal = yield* orNotFound(yield* deals.find(companyId, id.value))
      yield* timeline.add(companyId, deal.id, {
        type: "system",
        actorUserId: null,
        body: "Deal created automatically from the first inbound message of the conversation.",
        metadata: { source: "auto_create", conversation_id: conversationId, channel_id: options.channelId ?? null }
      })
      yield* events.emit(companyId, "deal.created", { deal })
      return Option.some(deal.id)
    }).pipe(sql.withTransaction, Effect.orDie)
  }).pipe(Effect.provide(AutoCreateRepos), Effect.withSpan("Deals.autoCreateForConversation"))

/**
 * `autoCreateForConversation` bound to the services at hand, for a caller built as a layer
 * (`messages/Inbound.ts`): `const autoCreateDeal = yield* makeAutoCreate` while building, then
 * `yield* autoCreateDeal(companyId, conversationId, { channelId })` inside the inbound transaction.
 * A failure is logged and rolled back to its savepoint; the inbound message is kept.
 */
export const makeAutoCreate = Effect.gen(function*() {
  const context = yield* Effect.context<SqlClient.SqlClient | Events>()
  return (companyId: number, conversationId: number, options: { readonly channelId?: number } = {}): Effect.Effect<Option.Option<number>> =>
    autoCreateForConversation(CompanyId.make(companyId), conversationId, options).pipe(
      Effect.catchCause((cause) => Effect.as(Effect.logWarning("deal auto-creation failed", cause), Option.none())),
      Effect.provideContext(context)
    )
})

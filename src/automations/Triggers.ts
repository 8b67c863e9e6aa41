import { Context, Effect, Layer, Predicate } from "effect"
import { CompanyId } from "../auth/Domain.ts"
import type { EventEnvelope } from "../events/Domain.ts"
import { makeReadBatcher } from "../platform/Batcher.ts"
import { compileVerdict, evaluate, eventText, type EventText, type Facts } from "./Conditions.ts"
import { AutomationContextRepo } from "./ContextRepo.ts"
import { type Trigger, TriggerEvents } from "./Domain.ts"
import { AutomationsRepo } from "./Repo.ts"
import type { StartRequest } from "./Starter.ts"

interface Compiled {
  readonly automationId: string
  readonly versionId: string
  readonly trigger: Trigger
  readonly verdict: (e: EventText) => boolean | undefined
}

type CompanyIndex = ReadonlyMap<string, ReadonlyArray<Compiled>>

/** Keys that change what a company's index holds; the writer emits them in its transaction. */
export const publishKeys: ReadonlySet<string> = new Set(["automation.created", "automation.updated", "automation.deleted"])
const triggerKeys: ReadonlySet<string> = new Set(TriggerEvents)

const obj = (v: unknown): Record<string, any> => (Predicate.isObject(v) ? (v as Record<string, any>) : {})
const int = (v: unknown): number | null => (typeof v === "number" && Number.isSafeInteger(v) ? v : typeof v === "string" && /^\d+$/.test(v) ? Number(v) : null)

/** What the steps and conditions read of an event, by key; null when the event cannot start a run (an outbound message). */
export const contextOf = (event: EventEnvelope): Record<string, any> | null => {
  const data = obj(event.data)
  const base = { event: event.event, event_id: Number(event.seq), payload: data }
  switch (event.event) {
    case "message.created": {
      const message = obj(data.message)
      // Only inbound messages start runs: a message an automation (or anyone) sent never does.
      if (message.direction !== "inbound") return null
      return {
        ...base,
        message_id: int(message.id),
        conversation_id: int(data.conversation_id),
        thread_id: int(data.thread_id),
        channel_id: int(data.channel_id),
        contact_account_id: int(message.contact_account_id),
        text: typeof message.message_content === "string" ? message.message_content : null,
        message_type: typeof message.message_type === "string" ? message.message_type : null
      }
    }
    case "conversation.created":
      return { ...base, conversation_id: int(data.conversation_id), contact_id: int(data.contact_id), channel_id: int(data.channel_id), thread_id: int(data.thread_id) }
    case "contact.created":
    case "contact.updated":
      return { ...base, contact_id: int(data.contact_id) ?? int(obj(data.contact).id) }
    case "deal.created":
    case "deal.stage_changed": {
      const deal = obj(data.deal)
      return { ...base, deal_id: int(deal.id), contact_id: int(deal.contact_id), conversation_id: int(deal.conversation_id), deal_stage_id: int(deal.funnel_stage_id) }
    }
    case "tag.added":
      return { ...base, contact_id: int(data.contact_id), tag_id: int(data.tag_id) }
    default:
      return null
  }
}

/** The facts conditions read for one event or run; each costly one is read at most once. */
export const factsFrom = (
  facts: AutomationContextRepo["Service"],
  companyId: CompanyId,
  context: Record<string, any>,
  contactId: Effect.Effect<number | null>,
  path: (field: string) => unknown = () => undefined
): Facts => {
  const cached = <A>(effect: Effect.Effect<A>) => Effect.runSync(Effect.cached(effect))
  return {
    text: context.text ?? null,
    messageType: context.message_type ?? null,
    isFirstMessage: cached(
      context.conversation_id === null || context.conversation_id === undefined
        ? Effect.succeed(false)
        : Effect.map(facts.inboundCount(companyId, context.conversation_id), (n) => n === 1)
    ),
    tagIds: cached(Effect.flatMap(contactId, (id) => (id === null ? Effect.succeed(new Set<number>()) : facts.tagIds(companyId, id)))),
    contactField: (field) => Effect.flatMap(contactId, (id) => (id === null ? Effect.succeed(null) : facts.contactField(companyId, id, field))),
    dealStageId: context.deal_stage_id !== undefined && context.deal_stage_id !== null
      ? Effect.succeed(context.deal_stage_id as number)
      : Effect.flatMap(contactId, (id) => Effect.map(facts.dealStage(companyId, null, id), (d) => d?.stageId ?? null)),
    path
  }
}

/**
 * The in-memory trigger index: per company, the published triggers of its active automations by
 * event key. A company's index is read once (its first event) and read again when an
 * `automation.*` event says it changed; evaluating an event is a map lookup, then the conditions.
 */
export class TriggerIndex extends Context.Service<TriggerIndex, {
  /** The runs an event starts (conditions evaluated; the costly facts read only when a condition asks). */
  match(event: EventEnvelope): Effect.Effect<ReadonlyArray<StartRequest>>
  /**
   * False when the event certainly starts no run, decided at once from the index in memory (its key
   * triggers nothing in its company), so that most events cost the consumer no effect. An event that
   * changes a company's automations drops its index here, as `match` does, and starts nothing.
   */
  mayStart(event: EventEnvelope): boolean
  /** Drops a company's index so its next event reads it again. */
  invalidate(companyId: number): void
}>()("crm/automations/TriggerIndex") {
  static readonly layer = Layer.effect(
    TriggerIndex,
    Effect.gen(function*() {
      const repo = yield* AutomationsRepo
      const facts = yield* AutomationContextRepo
      const companies = new Map<number, CompanyIndex>()
      const channelTypes = new Map<number, ReadonlyMap<number, string>>()
      // The senders of a company's matching messages, read together while an earlier read is under way.
      const contactsOfAccounts = yield* makeReadBatcher<{ readonly companyId: CompanyId; readonly accountId: number }, number>({
        key: (a) => String(a.companyId),
        id: (a) => a.accountId,
        max: 500,
        read: (first, ids) => facts.contactsOfAccounts(first.companyId, ids)
      })

      const load = Effect.fnUntraced(function*(companyId: number) {
        const rows = yield* repo.published(CompanyId.make(companyId))
        const index = new Map<string, Array<Compiled>>()
        for (const row of rows) {
          for (const trigger of row.triggers) {
            const list = index.get(trigger.event) ?? []
            list.push({
              automationId: row.automation_id,
              versionId: row.version_id,
              trigger,
              verdict: compileVerdict(trigger.conditions, trigger.conditionsJoiner)
            })
            index.set(trigger.event, list)
          }
        }
        companies.set(companyId, index)
        return index as CompanyIndex
      })

      const channelType = Effect.fnUntraced(function*(companyId: number, channelId: number) {
        let types = channelTypes.get(companyId)
        if (types === undefined || !types.has(channelId)) {
          types = yield* facts.channelTypes(CompanyId.make(companyId))
          channelTypes.set(companyId, types)
        }
        return types.get(channelId) ?? null
      })

      const none: ReadonlyArray<StartRequest> = []
      const nothing = Effect.succeed(none)

      const startsFor = Effect.fnUntraced(function*(
        event: EventEnvelope,
        context: Record<string, any>,
        matched: ReadonlyArray<Compiled>,
        undecided: ReadonlyArray<Compiled>
      ) {
        const companyNumber = Number(event.company_id)
        const companyId = CompanyId.make(companyNumber)
        const contactId = Effect.runSync(Effect.cached(
          context.contact_id !== undefined
            ? Effect.succeed(context.contact_id as number | null)
            : context.contact_account_id !== null && context.contact_account_id !== undefined
            ? Effect.map(contactsOfAccounts.submit({ companyId, accountId: context.contact_account_id }), (contactId) => contactId ?? null)
            : Effect.succeed(null)
        ))
        const chosen = [...matched]
        if (undecided.length > 0) {
          const f = factsFrom(facts, companyId, context, contactId)
          for (const c of undecided) {
            const t = c.trigger
            if (context.channel_id !== undefined && context.channel_id !== null && t.channelType !== undefined && t.channelType !== null &&
              (yield* channelType(companyNumber, context.channel_id)) !== t.channelType) continue
            if (yield* evaluate(t.conditions, t.conditionsJoiner, f)) chosen.push(c)
          }
        }
        if (chosen.length === 0) return none
        const contact = yield* contactId
        return chosen.map((c): StartRequest => ({
          companyId: companyNumber,
          automationId: c.automationId,
          versionId: c.versionId,
          event: event.event,
          eventId: Number(event.seq),
          contactId: contact,
          context: { ...context, contact_id: contact }
        }))
      })

      const matchIn = (event: EventEnvelope, index: CompanyIndex): Effect.Effect<ReadonlyArray<StartRequest>> => {
        const candidates = index.get(event.event)
        if (candidates === undefined || candidates.length === 0) return nothing
        const context = contextOf(event)
        if (context === null) return nothing
        const channelId: number | null = context.channel_id ?? null
        const types = channelTypes.get(Number(event.company_id))
        const text = eventText(context.text ?? null, context.message_type ?? null)
        const matched: Array<Compiled> = []
        const undecided: Array<Compiled> = []
        for (const c of candidates) {
          const t = c.trigger
          if (channelId !== null && t.channels !== undefined && t.channels.length > 0 && !t.channels.includes(channelId)) continue
          const verdict = c.verdict(text)
          if (verdict === false) continue
          if (channelId !== null && t.channelType !== undefined && t.channelType !== null) {
            const type = types?.get(channelId)
            if (type === undefined) {
              undecided.push(c)
              continue
            }
            if (type !== t.channelType) continue
          }
          if (verdict === true) matched.push(c)
          else undecided.push(c)
        }
        if (matched.length === 0 && undecided.length === 0) return nothing
        return startsFor(event, context, matched, undecided)
      }

      const mayStart = (event: EventEnvelope): boolean => {
        if (publishKeys.has(event.event)) {
          companies.delete(Number(event.company_id))
          return false
        }
        if (!triggerKeys.has(event.event)) return false
        const index = companies.get(Number(event.company_id))
        return index === undefined || (index.get(event.event)?.length ?? 0) > 0
      }

      const match = (event: EventEnvelope): Effect.Effect<ReadonlyArray<StartRequest>> => {
        if (!mayStart(event)) return nothing
        const index = companies.get(Number(event.company_id))
        return index !== undefined ? matchIn(event, index) : Effect.flatMap(load(Number(event.company_id)), (loaded) => matchIn(event, loaded))
      }

      return TriggerIndex.of({ match, mayStart, invalidate: (companyId) => void companies.delete(companyId) })
    })
  ).pipe(Layer.provide([AutomationsRepo.layer, AutomationContextRepo.layer]))
}

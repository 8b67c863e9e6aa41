import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { type Actor, type CompanyId, CurrentActor } from "../../auth/Domain.ts"
import { Contacts } from "../../contacts/Contacts.ts"
import { Deals } from "../../deals/Deals.ts"
import { Events } from "../../events/Events.ts"
import { Media } from "../../media/Media.ts"
import { Outbound } from "../../messages/Outbound.ts"
import { Send } from "../../messages/Send.ts"
import { type ThreadContext, ThreadsRepo } from "../../messages/ThreadsRepo.ts"
import { type Batcher, makeBatcher, makeReadBatcher } from "../../platform/Batcher.ts"
import { AppConfig } from "../../platform/Config.ts"
import { OutboundHttp } from "../../platform/OutboundHttp.ts"
import { TemplateSending } from "../../templates/Sending.ts"
import { AutomationContextRepo } from "../ContextRepo.ts"

/** Items a batch of tag steps or thread reads takes at most. */
const batchMax = 256

export interface TagChange {
  readonly companyId: CompanyId
  readonly actor: Actor
  readonly contactId: number
  readonly tagId: number
  readonly adding: boolean
}

/** What actions act through, built once with the executor. */
export class ActionServices extends Context.Service<ActionServices, {
  readonly sql: SqlClient.SqlClient
  readonly config: AppConfig["Service"]
  readonly ctx: AutomationContextRepo["Service"]
  readonly events: Events["Service"]
  readonly contacts: Contacts["Service"]
  readonly deals: Deals["Service"]
  readonly media: Media["Service"]
  readonly outbound: Outbound["Service"]
  readonly sender: Send["Service"]
  readonly templates: TemplateSending["Service"]
  readonly http: OutboundHttp["Service"]
  /** The trigger's threads that concurrent sends of a company address, read together. */
  readonly ownThreads: Batcher<{ readonly companyId: CompanyId; readonly threadId: number }, ThreadContext | undefined>
  /** Tag steps of a company's concurrent runs, acting as one member, in one read and at most one write. */
  readonly tagChanges: Batcher<TagChange, boolean | { readonly message: string }>
}>()("crm/automations/ActionServices") {
  static readonly layer = Layer.effect(ActionServices, Effect.gen(function*() {
    const threads = yield* ThreadsRepo
    const contacts = yield* Contacts
    const ownThreads = yield* makeReadBatcher<{ readonly companyId: CompanyId; readonly threadId: number }, ThreadContext>({
      key: (t) => String(t.companyId),
      id: (t) => t.threadId,
      max: batchMax,
      read: (first, ids) => threads.threadContexts(first.companyId, ids)
    })
    const tagChanges = yield* makeBatcher<TagChange, boolean | { readonly message: string }>({
      key: (c) => `${c.companyId}:${c.actor.userId}:${c.adding}`,
      max: batchMax,
      run: (_, items) =>
        contacts.changeTags(items.map((c) => ({ id: c.contactId, tagId: c.tagId })), items[0].adding).pipe(
          Effect.provideService(CurrentActor, items[0].actor),
          Effect.catch((refused) => Effect.succeed(items.map(() => refused)))
        )
    })
    return ActionServices.of({
      sql: yield* SqlClient.SqlClient,
      config: yield* AppConfig,
      ctx: yield* AutomationContextRepo,
      events: yield* Events,
      contacts,
      deals: yield* Deals,
      media: yield* Media,
      outbound: yield* Outbound,
      sender: yield* Send,
      templates: yield* TemplateSending,
      http: yield* OutboundHttp,
      ownThreads,
      tagChanges
    })
  })).pipe(Layer.provide(ThreadsRepo.layer))
}

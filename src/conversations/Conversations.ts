import { Context, Effect, Layer, Option } from "effect"
import { CurrentActor, requirePermission } from "../auth/Domain.ts"
import { type Forbidden, type NotFound, notFound } from "../platform/Errors.ts"
import { type PageInfo, pageInfo } from "../platform/Pagination.ts"
import { ChannelAccess } from "../auth/ChannelAccess.ts"
import type { Conversation, ConversationDetail } from "./Domain.ts"
import { ConversationsRepo } from "./Repo.ts"

/** Conversations of the caller's active company, limited to those with a thread on a channel the caller sees. */
export class Conversations extends Context.Service<Conversations, {
  list(page: number, perPage: number): Effect.Effect<{ readonly items: ReadonlyArray<Conversation>; readonly pagination: typeof PageInfo.Type }, Forbidden, CurrentActor>
  get(id: number): Effect.Effect<ConversationDetail, Forbidden | NotFound, CurrentActor>
}>()("crm/conversations/Conversations") {
  static readonly layerNoDeps = Layer.effect(
    Conversations,
    Effect.gen(function*() {
      const repo = yield* ConversationsRepo
      const access = yield* ChannelAccess

      const list = Effect.fn("Conversations.list")(function*(page: number, perPage: number) {
        const company = yield* requirePermission("conversation.view")
        const visible = yield* access.visible(company.id, yield* CurrentActor)
        const { items, total } = yield* repo.list(company.id, visible, page, perPage)
        return { items, pagination: pageInfo(page, perPage, total) }
      })

      const get = Effect.fn("Conversations.get")(function*(id: number) {
        const company = yield* requirePermission("conversation.view")
        const visible = yield* access.visible(company.id, yield* CurrentActor)
        const found = yield* repo.find(company.id, visible, id)
        if (Option.isNone(found)) return yield* notFound("Conversation not found.")
        const threads = yield* repo.threads(company.id, visible, id)
        return { ...found.value, threads }
      })

      return Conversations.of({ list, get })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(ConversationsRepo.layer))
}

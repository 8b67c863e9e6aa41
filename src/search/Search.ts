import { Context, Effect, Layer } from "effect"
import { CurrentActor, requirePermission } from "../auth/Domain.ts"
import { AppConfig } from "../platform/Config.ts"
import {
  type Forbidden,
  invalidField,
  type NotFound,
  notFound,
  ServiceUnavailable,
  type TooManyRequests,
  type Unprocessable
} from "../platform/Errors.ts"
import { offsetOf, pageInfo } from "../platform/Pagination.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { ChannelAccess } from "../auth/ChannelAccess.ts"
import { perPageRange, type SearchInput, type SearchResult, snippetOf } from "./Domain.ts"
import { SearchRepo } from "./Repo.ts"

export type SearchError = Forbidden | NotFound | Unprocessable | TooManyRequests | ServiceUnavailable

export class Search extends Context.Service<Search, {
  messages(input: SearchInput): Effect.Effect<SearchResult, SearchError, CurrentActor>
}>()("crm/search/Search") {
  static readonly layerNoDeps = Layer.effect(
    Search,
    Effect.gen(function*() {
      const repo = yield* SearchRepo
      const access = yield* ChannelAccess
      const limiter = yield* RateLimiter
      const config = yield* AppConfig

      const messages = Effect.fn("Search.messages")(function*(input: SearchInput) {
        const company = yield* requirePermission("conversation.view")
        const actor = yield* CurrentActor
        yield* limiter.heavy(company.id, actor)
        const q = input.q.trim()
        if (Array.from(q).length < 2) return yield* invalidField("q", "The q field must be at least 2 characters.")
        const page = input.page ?? 1
        const perPage = input.perPage ?? perPageRange.fallback
        const visible = yield* access.visible(company.id, actor)
        if (input.conversation_id !== undefined) {
          const seen = yield* repo.conversationVisible(company.id, visible, input.conversation_id)
          if (!seen) return yield* notFound("Conversation not found.")
        }
        const found = yield* repo.search(company.id, {
          q,
          conversationId: input.conversation_id,
          visible,
          perPage,
          offset: offsetOf(page, perPage),
          countCap: config.searchCountCap,
          timeoutMs: config.searchTimeoutMs
        }).pipe(
          Effect.catchReason("SqlError", "StatementTimeoutError", () =>
            Effect.fail(
              new ServiceUnavailable({
                message: "The search took too long. Try more specific words or narrow it to a conversation."
              })
            )),
          Effect.catchTag("SqlError", Effect.die)
        )
        return {
          items: found.rows.map((row) => ({
            message_id: row.id,
            conversation_id: row.conversation_id,
            thread_id: row.thread_id,
            created_at: row.created_at.toISOString(),
            snippet: snippetOf(row.message_content ?? "", q),
            query: q,
            contact_name: row.contact_name,
            channel_id: row.channel_id,
            channel_type: row.channel_type
          })),
          pagination: pageInfo(page, perPage, found.total),
          total_matches: found.total
        }
      })

      return Search.of({ messages })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(SearchRepo.layer))
}

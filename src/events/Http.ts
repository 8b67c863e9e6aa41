import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { currentCompany } from "../auth/Domain.ts"
import { cursorInfo } from "../platform/Pagination.ts"
import { Catalog } from "./Catalog.ts"
import { Events } from "./Events.ts"

export const EventsHttp = HttpApiBuilder.group(Api, "events", Effect.fn(function*(handlers) {
  const events = yield* Events
  return handlers
    .handle("replay", Effect.fn(function*({ query }) {
      const company = yield* currentCompany
      const after = query.after ?? 0
      const limit = query.limit ?? 100
      const items = yield* events.replay(company.id, after, limit)
      return {
        data: { items, pagination: cursorInfo(limit), next_after: items.length > 0 ? items[items.length - 1].seq : after }
      }
    }))
    .handle("catalog", ({ query }) =>
      Effect.succeed({
        data: Catalog.filter((e) =>
          (query.type === undefined || e.type === query.type) && (query.group === undefined || e.group === query.group)
        )
      }))
}))

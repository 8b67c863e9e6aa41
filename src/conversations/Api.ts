import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, NotFound } from "../platform/Errors.ts"
import { Paged } from "../platform/Pagination.ts"
import { Conversation, ConversationDetail, ConversationId, ListQuery } from "./Domain.ts"

export class ConversationsApi extends HttpApiGroup.make("conversations")
  .add(
    HttpApiEndpoint.get("list", "/v1/conversations", {
      query: ListQuery,
      success: Data(Paged(Conversation)),
      error: AuthErrors
    }),
    HttpApiEndpoint.get("get", "/v1/conversations/:id", {
      params: { id: ConversationId },
      success: Data(ConversationDetail),
      error: [...AuthErrors, NotFound]
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Conversations",
    description: "One conversation per contact in the active company, newest activity first; only those with a thread " +
      "on a channel the caller may see."
  }))
{}

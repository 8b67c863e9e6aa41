import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, NotFound, ServiceUnavailable, Unprocessable } from "../platform/Errors.ts"
import { SearchQuery, SearchResult } from "./Domain.ts"

export class SearchApi extends HttpApiGroup.make("messageSearch")
  .add(
    HttpApiEndpoint.get("search", "/v1/messages/search", {
      query: SearchQuery,
      success: Data(SearchResult),
      error: [...AuthErrors, NotFound, Unprocessable, ServiceUnavailable]
    }).annotateMerge(OpenApi.annotations({
      description: "Full-text search (Russian and English stemming) over the messages of the channels the caller may see, " +
        "newest first. `q` 2-255 characters, every word must match; `conversation_id` narrows it to one conversation " +
        "(404 when missing or another company's). `total_matches` equals `pagination.total` and is exact up to the " +
        "count cap (SEARCH_COUNT_CAP), a lower bound at it. 120 requests a minute per token or session user; a search " +
        "stopped by the statement timeout answers 503."
    }))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Message search" }))
{}

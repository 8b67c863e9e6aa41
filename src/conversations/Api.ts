import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, NotFound, Unprocessable } from "../platform/Errors.ts"
import {
  AssignInput,
  Conversation,
  ConversationDetail,
  ConversationId,
  ConversationList,
  ListQuery,
  PriorityInput,
  ReadInput,
  StatusInput
} from "./Domain.ts"

const params = { id: ConversationId }
const changed = { params, success: Data(Conversation), error: [...AuthErrors, NotFound, Unprocessable] }

export class ConversationsApi extends HttpApiGroup.make("conversations")
  .add(
    HttpApiEndpoint.get("list", "/v1/conversations", {
      query: ListQuery,
      success: Data(ConversationList),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Newest activity first. Filters: `status` (default all), `assignee` (`me`, `unassigned`, `assigned` or a member " +
        "id), `team_id`, `channel_id`, `priority` (or `none`), `unread=true`, `q` (contact name). `meta` counts mine, unassigned and " +
        "all under the other filters. Page with `page`/`perPage`, or pass `next_cursor` back as `cursor`."
    })),
    HttpApiEndpoint.get("get", "/v1/conversations/:id", {
      params,
      success: Data(ConversationDetail),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.post("assign", "/v1/conversations/:id/assignment", { ...changed, payload: AssignInput }).annotateMerge(
      OpenApi.annotations({
        description: "Sets `assignee_id` and/or `team_id` (null clears). The member must see one of the conversation's channels " +
          "through their teams. Emits `conversation.assigned`; the assignee hears it on `private-user.{id}` unless their " +
          "`conversation_assigned` push trigger is off or quiet hours hold it."
      })
    ),
    HttpApiEndpoint.post("status", "/v1/conversations/:id/status", { ...changed, payload: StatusInput }).annotateMerge(
      OpenApi.annotations({
        description: "`open`, `pending`, `resolved` or `snoozed` with a future `snoozed_until`. A snoozed conversation reopens at " +
          "that time or on the contact's next message, as does a resolved one on the contact's next message."
      })
    ),
    HttpApiEndpoint.post("priority", "/v1/conversations/:id/priority", { ...changed, payload: PriorityInput }),
    HttpApiEndpoint.post("read", "/v1/conversations/:id/read", { ...changed, payload: ReadInput }).annotateMerge(
      OpenApi.annotations({ description: "Marks the conversation read by the caller up to `message_id` (default: its last message)." })
    )
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Conversations",
    description: "The operator's inbox: one conversation per contact in the active company, only those with a thread on a " +
      "channel the caller may see (another's is 404). Reading and marking read need conversation.view; assignment, status and " +
      "priority need conversation.update (agents have both)."
  }))
{}

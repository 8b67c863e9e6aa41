import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, BadGateway, Conflict, NotFound, ServiceUnavailable, Unprocessable } from "../platform/Errors.ts"
import { Paged } from "../platform/Pagination.ts"
import {
  Around,
  AroundQuery,
  Attachment,
  AttachmentInput,
  CreateMessage,
  DeleteMessage,
  ForwardMessage,
  IdempotencyKeyHeader,
  KeyParam,
  ListQuery,
  Message,
  MessageId,
  Reaction,
  RecordStatus,
  SendMessage,
  SetReaction,
  SettleKey,
  StatusEntry,
  UpdateMessage
} from "./Domain.ts"

const Params = { id: MessageId }
const One = Data(Message)
const Created = One.pipe(HttpApiSchema.status(201))
const SendErrors = [...AuthErrors, NotFound, Unprocessable, Conflict, ServiceUnavailable]

export class MessagesApi extends HttpApiGroup.make("messages")
  .add(
    HttpApiEndpoint.get("list", "/v1/messages", {
      query: ListQuery,
      success: Data(Paged(Message)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Page mode (`page`, `perPage`) or cursor mode (`before_message_id`/`before_id` older, `after_message_id`/`after_id` " +
        "newer; `limit` = perPage, `order` = sortDir; pagination total and lastPage are null). `search` (alias `q`) filters by text."
    })),
    HttpApiEndpoint.post("send", "/v1/messages/send", {
      payload: SendMessage,
      headers: IdempotencyKeyHeader,
      success: Created,
      error: SendErrors
    }).annotateMerge(OpenApi.annotations({
      description: "Sends on `channel_id` to exactly one of `thread_id`, `contact_id` or `to{external_id|phone|username}` (the thread " +
        "is created when needed). With `Idempotency-Key` a repeat within 24 h replays the first answer."
    })),
    HttpApiEndpoint.post("create", "/v1/messages", {
      payload: CreateMessage,
      success: Created,
      error: SendErrors
    }),
    HttpApiEndpoint.post("settleKey", "/v1/messages/idempotency-keys/:key/settle", {
      params: { key: KeyParam },
      payload: SettleKey,
      success: One,
      error: [...AuthErrors, NotFound, Unprocessable, Conflict]
    }).annotateMerge(OpenApi.annotations({
      summary: "Settle an idempotency key of unknown outcome",
      description: "For company admins. A send cut off during the provider call leaves its key answering 409 " +
        "`outcome_unknown`; once the provider's console tells, `sent` (with its `external_message_id`, if known) or " +
        "`not_sent` (the message becomes `failed`) settles it, and retries with the key answer that message (201). " +
        "`message_id` picks the request when several of the company's users or endpoints used the key. 409 while " +
        "the first request may still be running; 422 `key_settled` once the key has its outcome."
    })),
    HttpApiEndpoint.get("get", "/v1/messages/:id", {
      params: Params,
      success: One,
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.patch("update", "/v1/messages/:id", {
      params: Params,
      payload: UpdateMessage,
      success: One,
      error: [...AuthErrors, NotFound, Unprocessable, BadGateway]
    }),
    HttpApiEndpoint.delete("remove", "/v1/messages/:id", {
      params: Params,
      payload: [Schema.Null, DeleteMessage],
      success: One,
      error: [...AuthErrors, NotFound, Unprocessable, BadGateway]
    }),
    HttpApiEndpoint.get("around", "/v1/messages/:id/around", {
      params: Params,
      query: AroundQuery,
      success: Data(Around),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.get("statuses", "/v1/messages/:id/statuses", {
      params: Params,
      success: Data(Schema.Array(StatusEntry)),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.post("addStatus", "/v1/messages/:id/statuses", {
      params: Params,
      payload: RecordStatus,
      success: Data(StatusEntry).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.get("reactions", "/v1/messages/:id/reactions", {
      params: Params,
      success: Data(Schema.Array(Reaction)),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.post("react", "/v1/messages/:id/reactions", {
      params: Params,
      payload: SetReaction,
      success: Data(Reaction),
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.delete("unreact", "/v1/messages/:id/reactions", {
      params: Params,
      success: Data(Schema.Struct({ message: Schema.String, removed: Schema.Boolean })),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.post("like", "/v1/messages/:id/like", {
      params: Params,
      success: Schema.Struct({ message: Schema.String }),
      error: [...AuthErrors, NotFound, Unprocessable, BadGateway]
    }),
    HttpApiEndpoint.get("attachments", "/v1/messages/:id/attachments", {
      params: Params,
      success: Data(Schema.Array(Attachment)),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.post("attach", "/v1/messages/:id/attachments", {
      params: Params,
      payload: AttachmentInput,
      success: Data(Attachment).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, NotFound, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Records an uploaded file (`media_id`) or a library sticker (`sticker_id`) on an existing message; nothing is sent."
    })),
    HttpApiEndpoint.post("fetchAttachment", "/v1/messages/:id/attachments/:attachment/fetch", {
      params: { id: MessageId, attachment: Schema.Int },
      success: Data(Attachment),
      error: [...AuthErrors, NotFound, Unprocessable, BadGateway]
    }).annotateMerge(OpenApi.annotations({
      description: "Pulls the provider's bytes into local storage; afterwards `url` is a stable signed link. " +
        "422 `attachment_not_fetchable` for template, ephemeral and unsupported_type attachments."
    })),
    HttpApiEndpoint.post("forward", "/v1/messages/:id/forward", {
      params: Params,
      payload: ForwardMessage,
      success: Created,
      error: SendErrors
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Messages",
    description: "Messages of the company's conversations, on the channels the caller may see."
  }))
{}

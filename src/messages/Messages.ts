import { Clock, Context, Effect, Layer, Option, type Schema } from "effect"
import { SqlClient } from "effect/sql"
import { ChannelAccess } from "../auth/ChannelAccess.ts"
import { type CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { normalizeMime } from "../media/Domain.ts"
import { Media } from "../media/Media.ts"
import { Credentials } from "../providers/Credentials.ts"
import { channelRules } from "../providers/Domain.ts"
import { Providers } from "../providers/Provider.ts"
import {
  type BadGateway,
  type Forbidden,
  invalidFields as invalid,
  type NotFound,
  notFound,
  ruleViolation,
  type TooManyRequests,
  type Unprocessable, orNotFound } from "../platform/Errors.ts"
import { cursorInfo, pageInfo } from "../platform/Pagination.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import type { Attachment, AttachmentInput, DeleteMessage, ListQuery, Message, RecordStatus, StatusEntry, UpdateMessage } from "./Domain.ts"
import { type MessageRow, MessagesRepo, toMessage } from "./Repo.ts"
import { advances, type Change, contextOf, providerFailed, recipientOf, unfetchable, updatedPayload } from "./Rules.ts"
import { ThreadsRepo } from "./ThreadsRepo.ts"
import { Visibility } from "./Visibility.ts"

export type ListParams = Schema.Struct<typeof ListQuery>["Type"]

type Denied = Forbidden | NotFound

const present = <A>(value: A | null | undefined): value is A => value !== null && value !== undefined

/** Reading messages and changing the ones already there: edits, deletes, statuses and attachments. */
export class Messages extends Context.Service<Messages, {
  list(query: ListParams): Effect.Effect<{ readonly items: ReadonlyArray<Message>; readonly pagination: ReturnType<typeof pageInfo> | ReturnType<typeof cursorInfo> }, Forbidden | Unprocessable, CurrentActor>
  get(id: number): Effect.Effect<Message, Denied, CurrentActor>
  update(id: number, input: UpdateMessage): Effect.Effect<Message, Denied | Unprocessable | BadGateway, CurrentActor>
  remove(id: number, input: DeleteMessage): Effect.Effect<Message, Denied | Unprocessable | BadGateway, CurrentActor>
  around(id: number, limit: number): Effect.Effect<{
    readonly items: ReadonlyArray<Message>
    readonly anchor_id: number
    readonly has_more_before: boolean
    readonly has_more_after: boolean
  }, Denied | TooManyRequests, CurrentActor>
  statuses(id: number): Effect.Effect<ReadonlyArray<StatusEntry>, Denied, CurrentActor>
  addStatus(id: number, input: RecordStatus): Effect.Effect<StatusEntry, Denied | Unprocessable, CurrentActor>
  attachments(id: number): Effect.Effect<ReadonlyArray<Attachment>, Denied, CurrentActor>
  /** Adds an uploaded file or a sticker to an existing message (a record; nothing is sent). */
  attach(id: number, input: AttachmentInput): Effect.Effect<Attachment, Denied | Unprocessable, CurrentActor>
  /** Pulls the provider's bytes of an attachment into storage; afterwards its `url` is the stable signed link. */
  fetchAttachment(id: number, attachmentId: number): Effect.Effect<Attachment, Denied | Unprocessable | BadGateway, CurrentActor>
}>()("crm/messages/Messages") {
  static readonly layerNoDeps = Layer.effect(
    Messages,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* MessagesRepo
      const threads = yield* ThreadsRepo
      const visibility = yield* Visibility
      const access = yield* ChannelAccess
      const events = yield* Events
      const providers = yield* Providers
      const credentials = yield* Credentials
      const limiter = yield* RateLimiter
      const media = yield* Media

      const render = Effect.fnUntraced(function*(companyId: CompanyId, rows: ReadonlyArray<MessageRow>) {
        const attachments = yield* repo.attachments(companyId, rows.map((r) => r.id))
        const now = yield* Clock.currentTimeMillis
        return rows.map((row) => toMessage(row, attachments.get(row.id) ?? [], now))
      })
      const renderOne = (companyId: CompanyId, row: MessageRow) => Effect.map(render(companyId, [row]), (all) => all[0])

      // ------------------------------------------------------------ reading

      const list = Effect.fn("Messages.list")(function*(q: ListParams) {
        const company = yield* requirePermission("conversation.view")
        const actor = yield* CurrentActor
        const before = q.before_message_id ?? q.before_id
        const after = q.after_message_id ?? q.after_id
        if (before !== undefined && after !== undefined) {
          return yield* invalid({ before_message_id: ["Give before_message_id or after_message_id, not both."] })
        }
        const visible = yield* access.visible(company.id, actor)
        const cursorId = before ?? after
        if (cursorId !== undefined) {
          const cursor = yield* repo.find(company.id, cursorId)
          if (Option.isNone(cursor) || (visible !== "all" && !visible.has(cursor.value.channel_id))) {
            const field = before !== undefined
              ? (q.before_message_id !== undefined ? "before_message_id" : "before_id")
              : (q.after_message_id !== undefined ? "after_message_id" : "after_id")
            return yield* invalid({ [field]: [`The selected ${field.replace(/_/g, " ")} is invalid.`] })
          }
        }
        const search = q.search ?? q.q
        const perPage = q.perPage ?? q.limit ?? 20
        const page = q.page ?? 1
        const { rows, total } = yield* repo.list(company.id, visible, {
          conversationId: q.conversation_id,
          threadId: q.thread_id,
          channelId: q.channel_id,
          direction: q.direction,
          messageType: q.message_type,
          search: search === undefined || search.trim() === "" ? undefined : search.trim(),
          sortBy: q.sortBy ?? "timestamp",
          sortDir: q.sortDir ?? q.order ?? "desc",
          perPage,
          page,
          cursor: cursorId === undefined ? undefined : { kind: before !== undefined ? "before" : "after", id: cursorId }
        })
        const items = yield* render(company.id, rows)
        return { items, pagination: total === null ? cursorInfo(perPage) : pageInfo(page, perPage, total) }
      })

      const get = Effect.fn("Messages.get")(function*(id: number) {
        const { company, row } = yield* visibility.message(id, "conversation.view")
        return yield* renderOne(company.id, row)
      })

      const around = Effect.fn("Messages.around")(function*(id: number, limit: number) {
        const { company, actor, row } = yield* visibility.message(id, "conversation.view")
        yield* limiter.heavy(company.id, actor)
        const visible = yield* access.visible(company.id, actor)
        const { before, after } = yield* repo.around(company.id, visible, row, limit)
        const items = yield* render(company.id, [...before.slice(0, limit).reverse(), row, ...after.slice(0, limit)])
        return { items, anchor_id: row.id, has_more_before: before.length > limit, has_more_after: after.length > limit }
      })

      // ------------------------------------------------------------ changing

      const emitUpdated = (companyId: CompanyId, row: MessageRow, change: Change) =>
        Effect.gen(function*() {
          const message = yield* renderOne(companyId, row)
          yield* events.emit(companyId, "message.updated", updatedPayload(message, change))
          return message
        })

      const update = Effect.fn("Messages.update")(function*(id: number, input: UpdateMessage) {
        const { company, row } = yield* visibility.message(id, "conversation.update")
        if (row.direction !== "outbound") return yield* ruleViolation("not_editable", "Only outbound messages can be edited.")
        if (row.deleted_at !== null) return yield* ruleViolation("message_deleted", "The message was deleted.")
        if (row.message_type !== "text") return yield* ruleViolation("not_editable", "Only text messages can be edited.")
        if (channelRules[row.channel_type].editWindowSeconds === null) {
          return yield* ruleViolation("edit_not_supported", `Messages on ${row.channel_type} cannot be edited.`)
        }
        const current = yield* renderOne(company.id, row)
        if (current.can_edit_until === null) return yield* ruleViolation("edit_window_closed", "The edit window of this message has closed.")
        const thread = yield* orNotFound(yield* threads.threadContext(company.id, row.thread_id))
        if (row.external_message_id !== null) {
          if (thread.channel_status !== "connected") return yield* ruleViolation("channel_not_connected", "The channel is not connected.")
          const channel = contextOf(credentials, company.id, thread)
          yield* providers.forChannel(channel).edit(channel, recipientOf(thread), row.external_message_id, input.text).pipe(
            Effect.mapError(providerFailed)
          )
        }
        return yield* Effect.gen(function*() {
          const updated = yield* repo.update(company.id, id, { content: input.text, edited: true })
          return yield* emitUpdated(company.id, updated, "edited")
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      const remove = Effect.fn("Messages.remove")(function*(id: number, input: DeleteMessage) {
        const { company, row } = yield* visibility.message(id, "conversation.update")
        const revoke = input?.mode === "revoke"
        if (revoke) {
          if (!channelRules[row.channel_type].revoke) {
            return yield* ruleViolation("revoke_not_supported", `Messages on ${row.channel_type} cannot be revoked.`)
          }
          if (row.direction !== "outbound") return yield* ruleViolation("not_revocable", "Only outbound messages can be revoked.")
          if (row.deleted_at !== null) return yield* ruleViolation("message_deleted", "The message was already deleted.")
          const current = yield* renderOne(company.id, row)
          if (current.can_revoke_until === null) {
            return yield* ruleViolation("revoke_window_closed", "The revoke window of this message has closed.")
          }
          const thread = yield* orNotFound(yield* threads.threadContext(company.id, row.thread_id))
          if (row.external_message_id !== null) {
            if (thread.channel_status !== "connected") return yield* ruleViolation("channel_not_connected", "The channel is not connected.")
            const channel = contextOf(credentials, company.id, thread)
            yield* providers.forChannel(channel).revoke(channel, recipientOf(thread), row.external_message_id).pipe(
              Effect.mapError(providerFailed)
            )
          }
        } else {
          if (row.direction !== "outbound") return yield* ruleViolation("not_deletable", "Only outbound messages can be deleted.")
          if (row.deleted_at !== null) return yield* renderOne(company.id, row)
        }
        return yield* Effect.gen(function*() {
          const updated = yield* repo.update(company.id, id, { content: null, deleted: true, revoked: revoke })
          return yield* emitUpdated(company.id, updated, revoke ? "revoked" : "deleted")
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      const statuses = Effect.fn("Messages.statuses")(function*(id: number) {
        const { company, row } = yield* visibility.message(id, "conversation.view")
        return yield* repo.statuses(company.id, row.id)
      })

      const addStatus = Effect.fn("Messages.addStatus")(function*(id: number, input: RecordStatus) {
        const { company, row } = yield* visibility.message(id, "conversation.update")
        if (row.direction !== "outbound") {
          return yield* ruleViolation("not_outbound", "Delivery statuses are recorded for outbound messages only.")
        }
        return yield* Effect.gen(function*() {
          const locked = yield* orNotFound(yield* repo.findForUpdate(company.id, id))
          const entry = yield* repo.addStatus(company.id, id, input.status, input.error ?? null)
          const next = advances(locked.status, input.status)
          const updated = next ? yield* repo.update(company.id, id, { status: input.status }) : locked
          yield* emitUpdated(company.id, updated, "status")
          return entry
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      // ------------------------------------------------------------ attachments

      const attachmentsOf = (companyId: CompanyId, messageId: number) =>
        Effect.map(repo.attachments(companyId, [messageId]), (all) => all.get(messageId) ?? [])

      const attachments = Effect.fn("Messages.attachments")(function*(id: number) {
        const { company, row } = yield* visibility.message(id, "conversation.view")
        return yield* attachmentsOf(company.id, row.id)
      })

      const attach = Effect.fn("Messages.attach")(function*(id: number, input: AttachmentInput) {
        const { company, row } = yield* visibility.message(id, "conversation.update")
        if (present(input.media_id) === present(input.sticker_id)) {
          return yield* invalid({ media_id: ["Each attachment needs exactly one of media_id or sticker_id."] })
        }
        if (row.deleted_at !== null) return yield* ruleViolation("message_deleted", "The message was deleted.")
        const [resolved] = yield* media.resolve(company.id, [input]).pipe(
          Effect.catchIf(
            (e) => e.errors?.["attachments.0.type"] !== undefined,
            (e) => Effect.fail(invalid({ type: [...e.errors!["attachments.0.type"]] }))
          )
        )
        return yield* Effect.gen(function*() {
          const [added] = yield* repo.addAttachments(company.id, row.id, [resolved])
          yield* emitUpdated(company.id, row, "attachments")
          return added
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      const fetchAttachment = Effect.fn("Messages.fetchAttachment")(function*(id: number, attachmentId: number) {
        const { company, row } = yield* visibility.message(id, "conversation.view")
        const list = yield* attachmentsOf(company.id, row.id)
        const index = list.findIndex((a) => a.id === attachmentId)
        if (index < 0) return yield* notFound("Attachment not found.")
        const attachment = list[index]
        if (unfetchable.has(attachment.type)) {
          return yield* ruleViolation("attachment_not_fetchable", `An attachment of type ${attachment.type} cannot be fetched.`)
        }
        if (attachment.storage_path !== null) return attachment
        // Ingestion keeps the provider's media reference of attachment i (in id order) in the message metadata.
        const refs = row.metadata.attachment_refs
        const ref = Array.isArray(refs) && typeof refs[index] === "string" ? refs[index] as string : null
        const source = ref ?? attachment.url
        if (source === null) {
          return yield* ruleViolation("attachment_not_fetchable", "The provider gave no reference to fetch this attachment by.")
        }
        const thread = yield* orNotFound(yield* threads.threadContext(company.id, row.thread_id))
        const channel = contextOf(credentials, company.id, thread)
        const file = yield* providers.forChannel(channel).download(channel, source).pipe(Effect.mapError(providerFailed))
        const mimeType = normalizeMime(file.mimeType)
        const storagePath = yield* media.keep(company.id, file.bytes, attachment.mime_type ?? mimeType)
        const stored = yield* Effect.gen(function*() {
          const stored = yield* repo.storeAttachmentFile(company.id, row.id, attachment.id, {
            storagePath,
            mimeType,
            size: file.bytes.byteLength
          })
          if (Option.isSome(stored)) yield* emitUpdated(company.id, row, "attachments")
          return stored
        }).pipe(sql.withTransaction, Effect.orDie)
        if (Option.isSome(stored)) return stored.value
        // A concurrent fetch stored it first: keep theirs.
        yield* media.discard(storagePath)
        return (yield* attachmentsOf(company.id, row.id))[index]
      })

      return Messages.of({ list, get, update, remove, around, statuses, addStatus, attachments, attach, fetchAttachment })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([Visibility.layer, MessagesRepo.layer, ThreadsRepo.layer]))
}

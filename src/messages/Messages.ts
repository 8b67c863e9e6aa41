import { Clock, Context, Effect, Layer, Option, type Schema } from "effect"
import { SqlClient } from "effect/sql"
import { Conversation, type OutgoingAttachment, type SendRequest, type SendRefused } from "../../cluster/Conversation.ts"
import { CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Credentials } from "../providers/Credentials.ts"
import { type ProviderError, Providers } from "../providers/Provider.ts"
import { type ChannelType, channelRules } from "../providers/Domain.ts"
import { Events } from "../events/Events.ts"
import { normalizeMime } from "../media/Domain.ts"
import { Media } from "../media/Media.ts"
import {
  BadGateway,
  Conflict,
  type Forbidden,
  invalidFields,
  NotFound,
  notFound,
  ruleViolation,
  ServiceUnavailable,
  type TooManyRequests,
  Unprocessable
} from "../platform/Errors.ts"
import { Idempotency, keyInFlight, keyMismatch, requestHash } from "../platform/Idempotency.ts"
import { cursorInfo, pageInfo } from "../platform/Pagination.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { ChannelAccess } from "../auth/ChannelAccess.ts"
import type {
  Attachment,
  AttachmentInput,
  CreateMessage,
  DeleteMessage,
  ForwardMessage,
  ListQuery,
  Message,
  Reaction,
  RecordStatus,
  SendMessage,
  SetReaction,
  StatusEntry,
  UpdateMessage
} from "./Domain.ts"
import { type ChannelRow, type MessageRow, MessagesRepo, type ThreadContext, toMessage } from "./Repo.ts"
import { advances, type Change, blockedMessage, updatedPayload } from "./Rules.ts"
import { channelContext, windowClosed, windowRefusal } from "../providers/Rules.ts"

export type ListParams = Schema.Struct<typeof ListQuery>["Type"]

type Denied = Forbidden | NotFound
type SendFailure = Denied | Unprocessable | Conflict | ServiceUnavailable

export const messageNotFound = () => notFound("Message not found.")
const threadNotFound = () => notFound("Thread not found.")
const channelNotFound = () => notFound("Channel not found.")

const invalid = invalidFields

const present = <A>(value: A | null | undefined): value is A => value !== null && value !== undefined

const hasText = (text: string | null | undefined) => present(text) && text.trim() !== ""

/** Content checks shared by send and direct create; the spec's attachment-row rule first. */
const contentErrors = (input: {
  readonly text?: string | null | undefined
  readonly attachments?: ReadonlyArray<AttachmentInput> | null | undefined
  readonly sticker_id?: number | null | undefined
}) => {
  const errors: Record<string, Array<string>> = {}
  const rows = input.attachments ?? []
  rows.forEach((row, i) => {
    if (present(row.media_id) === present(row.sticker_id)) {
      errors[`attachments.${i}`] = ["Each attachment needs exactly one of media_id or sticker_id."]
    }
  })
  if (!hasText(input.text) && rows.length === 0 && !present(input.sticker_id)) {
    errors.text = ["The text field is required when no attachments or sticker are sent."]
  }
  return errors
}

/** The attachment rows of a send: `attachments[]`, then the top-level `sticker_id` as one more row. */
const sourcesOf = (input: {
  readonly attachments?: ReadonlyArray<AttachmentInput> | null | undefined
  readonly sticker_id?: number | null | undefined
}): ReadonlyArray<AttachmentInput> => [
  ...(input.attachments ?? []),
  ...(present(input.sticker_id) ? [{ sticker_id: input.sticker_id }] : [])
]

/** A message with attachments takes the first one's type (a caption rides along as its text). */
const messageTypeOf = (attachments: ReadonlyArray<OutgoingAttachment>) => attachments[0]?.type ?? "text"

const notForwardable = new Set(["reaction", "template", "ephemeral", "unsupported", "location", "contact"])
const unfetchable = new Set(["template", "ephemeral", "unsupported_type"])
const media = ["text", "image", "video", "audio", "voice", "document", "sticker"]
/** What each channel type can carry as a new outbound message (the social inbox has no voice notes or stickers). */
const carries: Record<ChannelType, ReadonlySet<string>> = {
  msgr_a: new Set(media),
  msgr_a_business: new Set(media),
  msgr_b: new Set(media),
  msgr_c_business: new Set(["text", "image", "video", "audio", "document"])
}

const providerFailed = (e: ProviderError) =>
  new BadGateway({ message: `The messaging provider refused the request (${e.code}): ${e.message}` })

export class Messages extends Context.Service<Messages, {
  list(query: ListParams): Effect.Effect<{ readonly items: ReadonlyArray<Message>; readonly pagination: ReturnType<typeof pageInfo> | ReturnType<typeof cursorInfo> }, Forbidden | Unprocessable, CurrentActor>
  get(id: number): Effect.Effect<Message, Denied, CurrentActor>
  send(input: SendMessage, key: string | undefined): Effect.Effect<Message, SendFailure, CurrentActor>
  create(input: CreateMessage): Effect.Effect<Message, SendFailure, CurrentActor>
  forward(id: number, input: ForwardMessage): Effect.Effect<Message, SendFailure, CurrentActor>
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
  reactions(id: number): Effect.Effect<ReadonlyArray<Reaction>, Denied, CurrentActor>
  react(id: number, input: SetReaction): Effect.Effect<Reaction, Denied | Unprocessable, CurrentActor>
  unreact(id: number): Effect.Effect<boolean, Denied, CurrentActor>
  like(id: number): Effect.Effect<void, Denied | Unprocessable | BadGateway, CurrentActor>
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
      const access = yield* ChannelAccess
      const events = yield* Events
      const idempotency = yield* Idempotency
      const providers = yield* Providers
      const credentials = yield* Credentials
      const limiter = yield* RateLimiter
      const conversations = yield* Conversation.client
      const media = yield* Media

      const render = Effect.fnUntraced(function*(companyId: number, rows: ReadonlyArray<MessageRow>) {
        const attachments = yield* repo.attachments(companyId, rows.map((r) => r.id))
        const now = yield* Clock.currentTimeMillis
        return rows.map((row) => toMessage(row, attachments.get(row.id) ?? [], now))
      })
      const renderOne = (companyId: number, row: MessageRow) => Effect.map(render(companyId, [row]), (all) => all[0])

      /** The message if it is in the company and on a channel the actor sees; 404 otherwise. */
      const visibleMessage = Effect.fnUntraced(function*(id: number, permission: string) {
        const company = yield* requirePermission(permission)
        const actor = yield* CurrentActor
        const row = yield* repo.find(company.id, id)
        if (Option.isNone(row) || !(yield* access.canSee(company.id, actor, row.value.channel_id))) {
          return yield* messageNotFound()
        }
        return { company, actor, row: row.value }
      })

      const visibleChannel = Effect.fnUntraced(function*(companyId: number, id: number) {
        const actor = yield* CurrentActor
        const row = yield* repo.channel(companyId, id)
        if (Option.isNone(row) || !(yield* access.canSee(companyId, actor, id))) return yield* channelNotFound()
        return row.value
      })

      const visibleThread = Effect.fnUntraced(function*(companyId: number, id: number) {
        const actor = yield* CurrentActor
        const thread = yield* repo.threadContext(companyId, id)
        if (Option.isNone(thread) || thread.value.channel_deleted || !(yield* access.canSee(companyId, actor, thread.value.channel_id))) {
          return yield* threadNotFound()
        }
        return thread.value
      })

      const contextOf = (companyId: number, t: ThreadContext) =>
        channelContext(credentials, companyId, {
          id: t.channel_id,
          type: t.channel_type,
          provider: t.provider,
          status: t.channel_status,
          credentials: t.credentials,
          settings: t.settings
        })

      const recipientOf = (t: ThreadContext) => t.external_thread_id ?? t.account_external_id ?? ""

      // ------------------------------------------------------------ sending

      const earlierAnswer = Effect.fnUntraced(function*(userId: number, endpoint: string, key: string, hash: string) {
        const recorded = yield* idempotency.lookup({ userId, endpoint, key }, hash)
        switch (recorded._tag) {
          case "Replay":
            return Option.some(recorded.body)
          case "Mismatch":
            return yield* keyMismatch()
          case "InFlight":
            // A long-pending key is settled by the entity (it replays the message it points to).
            return recorded.ageMs < 60_000 ? yield* keyInFlight() : Option.none()
          case "None":
            return Option.none()
        }
      })

      const replayed = (body: unknown) => (body as { readonly data: Message }).data

      type Outgoing = Omit<
        SendRequest,
        "conversationId" | "threadId" | "channelId" | "contactAccountId" | "recipient" | "externalThreadId"
      >

      /**
       * The sending rules on the target thread, then the send through the thread's conversation entity.
       * The rules are read here, just before the send: the entity orders sends, it does not freeze
       * a contact's block or a channel's status, so reading them inside it would be no fresher.
       */
      const dispatch = Effect.fnUntraced(function*(thread: ThreadContext, request: Outgoing) {
        const forward = request.endpoint === "forward"
        if (thread.channel_status !== "connected") {
          return yield* ruleViolation("channel_not_connected", forward ? "The target channel is not connected." : "The channel is not connected.")
        }
        if (thread.contact_blocked) return yield* ruleViolation("contact_blocked", blockedMessage)
        const closed = windowClosed(thread.channel_type, thread.is_group, thread.last_inbound_at, yield* Clock.currentTimeMillis)
        if (closed !== null) {
          const refusal = windowRefusal(thread.channel_type, closed, forward)
          return yield* ruleViolation(refusal.error_code, refusal.message)
        }
        const recipient = thread.external_thread_id ?? thread.account_external_id
        if (recipient === null) return yield* ruleViolation("no_recipient", "The thread has no recipient on the channel.")
        return yield* conversations(String(thread.conversation_id)).Send({
          ...request,
          conversationId: thread.conversation_id,
          threadId: thread.id,
          channelId: thread.channel_id,
          contactAccountId: thread.contact_account_id,
          recipient,
          externalThreadId: thread.external_thread_id
        }).pipe(
          Effect.catchTag("SendRefused", (e: SendRefused) =>
            Effect.fail(
              e.status === 404
                ? new NotFound({ message: e.message })
                : e.status === 409
                ? new Conflict({ message: e.message })
                : new Unprocessable(e.error_code === undefined ? { message: e.message } : { message: e.message, error_code: e.error_code })
            )),
          Effect.catch((e) =>
            e instanceof NotFound || e instanceof Conflict || e instanceof Unprocessable
              ? Effect.fail(e)
              : Effect.logWarning("conversation entity unavailable", e).pipe(
                Effect.andThen(Effect.fail(new ServiceUnavailable({ message: "The conversation is busy; retry shortly." })))
              ))
        )
      })

      /** Contact, conversation and thread for a contact account on a channel, created when missing (one transaction). */
      const ensureThreadFor = (companyId: number, channelId: number, accountId: number, contactId: number) =>
        Effect.gen(function*() {
          const existing = yield* repo.threadOf(companyId, channelId, accountId)
          if (Option.isSome(existing)) return existing.value.id
          return yield* Effect.gen(function*() {
            const conversation = yield* repo.ensureConversation(companyId, contactId)
            const thread = yield* repo.ensureThread(companyId, {
              channelId,
              conversationId: conversation.id,
              accountId,
              externalThreadId: null,
              group: false
            })
            if (conversation.created) {
              yield* events.emit(companyId, "conversation.created", {
                conversation: { id: conversation.id, contact_id: contactId },
                conversation_id: conversation.id,
                contact_id: contactId,
                channel_id: channelId,
                thread_id: thread.id
              })
            }
            return thread.id
          }).pipe(sql.withTransaction, Effect.orDie)
        })

      const ensureAccountFor = (companyId: number, channel: ChannelRow, externalId: string, profile: { phone?: string; username?: string }) =>
        Effect.gen(function*() {
          const account = yield* repo.ensureAccount(companyId, channel.type, externalId, {
            username: profile.username ?? null,
            name: null,
            phone: profile.phone ?? null,
            profilePicture: null
          })
          if (account.created) {
            yield* events.emit(companyId, "contact.created", {
              contact: { id: account.contact_id, status: "lead" },
              contact_id: account.contact_id,
              source: "outbound"
            })
          }
          return account
        }).pipe(sql.withTransaction, Effect.orDie)

      const digits = (phone: string) => phone.replace(/\D/g, "")
      const phoneAddressed = (type: ChannelType) => type === "msgr_a" || type === "msgr_a_business"

      const resolveSendTarget = Effect.fnUntraced(function*(companyId: number, channel: ChannelRow, input: SendMessage) {
        if (present(input.thread_id)) {
          const thread = yield* repo.threadContext(companyId, input.thread_id)
          if (Option.isNone(thread)) return yield* threadNotFound()
          if (thread.value.channel_id !== channel.id) {
            return yield* invalid({ thread_id: ["The thread does not belong to the given channel."] })
          }
          return thread.value
        }
        let accountId: number
        let contactId: number
        if (present(input.contact_id)) {
          const contact = yield* repo.contact(companyId, input.contact_id)
          if (Option.isNone(contact)) return yield* notFound("Contact not found.")
          const accounts = yield* repo.accountsOfContact(companyId, input.contact_id, channel.type)
          if (accounts.length === 0) {
            const phone = contact.value.phones.map(digits).find((p) => p.length > 0)
            if (!phoneAddressed(channel.type) || phone === undefined) {
              return yield* invalid({ contact_id: [`The contact has no ${channel.type} account to send to.`] })
            }
            const account = yield* ensureAccountFor(companyId, channel, phone, { phone })
            if (account.contact_id !== input.contact_id) {
              return yield* invalid({ contact_id: ["The contact's phone number belongs to another contact's account."] })
            }
            accountId = account.id
          } else {
            const withThread = yield* Effect.findFirst(accounts, (a) => Effect.map(repo.threadOf(companyId, channel.id, a.id), Option.isSome))
            accountId = Option.getOrElse(withThread, () => accounts[0]).id
          }
          contactId = input.contact_id
        } else {
          const to = input.to!
          if (present(to.external_id)) {
            const account = yield* ensureAccountFor(companyId, channel, to.external_id.trim(), {
              ...(present(to.phone) ? { phone: to.phone } : {}),
              ...(present(to.username) ? { username: to.username } : {})
            })
            accountId = account.id
            contactId = account.contact_id
          } else if (present(to.phone)) {
            const phone = digits(to.phone)
            if (phone.length < 5) return yield* invalid({ "to.phone": ["The to.phone field must be a phone number."] })
            const found = yield* repo.findAccount(companyId, channel.type, { phone })
            if (Option.isSome(found)) {
              accountId = found.value.id
              contactId = found.value.contact_id
            } else if (phoneAddressed(channel.type)) {
              const account = yield* ensureAccountFor(companyId, channel, phone, { phone: `+${phone}` })
              accountId = account.id
              contactId = account.contact_id
            } else {
              return yield* invalid({ "to.phone": [`No ${channel.type} account is known for this phone number.`] })
            }
          } else {
            const found = yield* repo.findAccount(companyId, channel.type, { username: to.username!.replace(/^@/, "") })
            if (Option.isNone(found)) {
              return yield* invalid({ "to.username": [`No ${channel.type} account with this username is known.`] })
            }
            accountId = found.value.id
            contactId = found.value.contact_id
          }
        }
        const threadId = yield* ensureThreadFor(companyId, channel.id, accountId, contactId)
        const thread = yield* repo.threadContext(companyId, threadId)
        return Option.getOrThrow(thread)
      })

      /** The send's attachment rows resolved against the company's uploads and stickers, if the channel can carry them. */
      const outgoing = Effect.fnUntraced(function*(companyId: number, thread: ThreadContext, rows: ReadonlyArray<AttachmentInput>) {
        if (rows.length === 0) return []
        const attachments: ReadonlyArray<OutgoingAttachment> = yield* media.resolve(companyId, rows)
        const refused = attachments.find((a) => !carries[thread.channel_type].has(a.type))
        if (refused !== undefined) {
          return yield* ruleViolation("content_type_unsupported", `A ${thread.channel_type} channel cannot carry a ${refused.type} attachment.`)
        }
        return attachments
      })

      const send = Effect.fn("Messages.send")(function*(input: SendMessage, key: string | undefined) {
        const company = yield* requirePermission("conversation.create")
        const actor = yield* CurrentActor
        const errors = contentErrors(input)
        const targets = [input.thread_id, input.contact_id, input.to].filter(present).length
        if (targets !== 1) errors.thread_id = ["Exactly one of thread_id, contact_id or to is required."]
        else if (present(input.to) && !present(input.to.external_id) && !hasText(input.to.phone) && !present(input.to.username)) {
          errors.to = ["The to field needs one of external_id, phone or username."]
        }
        if (Object.keys(errors).length > 0) return yield* invalid(errors)
        const hash = requestHash(input)
        // The hot path (a known thread on its own channel) needs one read, done alongside the key's;
        // anything else resolves the channel first so that its errors come in the documented order.
        const [earlier, known] = yield* Effect.all([
          key === undefined ? Effect.succeedNone : earlierAnswer(actor.userId, "send", key, hash),
          present(input.thread_id) ? repo.threadContext(company.id, input.thread_id) : Effect.succeedNone
        ], { concurrency: 2 })
        if (Option.isSome(earlier)) return replayed(earlier.value)
        const thread = Option.isSome(known) && known.value.channel_id === input.channel_id && !known.value.channel_deleted &&
            (yield* access.canSee(company.id, actor, known.value.channel_id))
          ? known.value
          : yield* resolveSendTarget(company.id, yield* visibleChannel(company.id, input.channel_id), input)
        const attachments = yield* outgoing(company.id, thread, sourcesOf(input))
        return yield* dispatch(thread, {
          endpoint: "send",
          companyId: company.id,
          userId: actor.userId,
          messageType: messageTypeOf(attachments),
          text: input.text ?? null,
          attachments,
          quotedMessageId: null,
          quotedExternalMessageId: null,
          metadata: {},
          idempotency: key === undefined ? null : { key, hash }
        })
      })

      const create = Effect.fn("Messages.create")(function*(input: CreateMessage) {
        const company = yield* requirePermission("conversation.create")
        const actor = yield* CurrentActor
        const errors = contentErrors(input)
        if (present(input.quoted_message_id) && present(input.quoted_external_message_id)) {
          errors.quoted_message_id = ["Give quoted_message_id or quoted_external_message_id, not both."]
        }
        if (Object.keys(errors).length > 0) return yield* invalid(errors)
        const key = input.idempotency_key ?? undefined
        const { idempotency_key: _, ...body } = input
        const hash = requestHash(body)
        if (key !== undefined) {
          const earlier = yield* earlierAnswer(actor.userId, "create", key, hash)
          if (Option.isSome(earlier)) return replayed(earlier.value)
        }
        const thread = yield* visibleThread(company.id, input.thread_id)
        let quotedMessageId: number | null = null
        let quotedExternal: string | null = null
        if (present(input.quoted_message_id)) {
          const quoted = yield* repo.find(company.id, input.quoted_message_id)
          if (Option.isNone(quoted) || quoted.value.conversation_id !== thread.conversation_id) {
            return yield* invalid({ quoted_message_id: ["The quoted message was not found in this conversation."] })
          }
          quotedMessageId = quoted.value.id
          quotedExternal = quoted.value.thread_id === thread.id ? quoted.value.external_message_id : null
        } else if (present(input.quoted_external_message_id)) {
          const quoted = yield* repo.findByExternal(company.id, thread.channel_id, input.quoted_external_message_id, null)
          quotedMessageId = Option.match(quoted, { onNone: () => null, onSome: (q) => q.id })
          quotedExternal = input.quoted_external_message_id
        }
        const attachments = yield* outgoing(company.id, thread, sourcesOf(input))
        return yield* dispatch(thread, {
          endpoint: "create",
          companyId: company.id,
          userId: actor.userId,
          messageType: messageTypeOf(attachments),
          text: input.text ?? null,
          attachments,
          quotedMessageId,
          quotedExternalMessageId: quotedExternal,
          metadata: quotedExternal !== null && quotedMessageId === null ? { quoted_external_message_id: quotedExternal } : {},
          idempotency: key === undefined ? null : { key, hash }
        })
      })

      /** Picks the forward's target channel (the first three forward refusal codes). */
      const forwardChannel = Effect.fnUntraced(function*(
        companyId: number,
        accountType: string,
        accountId: number,
        requested: number | null | undefined
      ) {
        if (present(requested)) {
          const channel = yield* visibleChannel(companyId, requested)
          if (channel.type !== accountType) {
            return yield* ruleViolation("channel_incompatible", `The target channel is ${channel.type}; the contact account is on ${accountType}.`)
          }
          return channel
        }
        const actor = yield* CurrentActor
        const visible = yield* access.visible(companyId, actor)
        const candidates = (yield* repo.channelsOfType(companyId, accountType)).filter((c) => visible === "all" || visible.has(c.id))
        if (candidates.length === 0) {
          return yield* ruleViolation("no_compatible_channel", `No ${accountType} channel is available to reach this contact account.`)
        }
        const threads = (yield* repo.threadsOfAccount(companyId, accountId)).filter((t) => candidates.some((c) => c.id === t.channel_id))
        if (threads.length === 1) return candidates.find((c) => c.id === threads[0].channel_id)!
        if (candidates.length === 1) return candidates[0]
        return yield* ruleViolation("channel_required", `Several ${accountType} channels can reach this contact account; give target_channel_id.`)
      })

      const forward = Effect.fn("Messages.forward")(function*(id: number, input: ForwardMessage) {
        const { company, actor, row: source } = yield* visibleMessage(id, "conversation.create")
        if (present(input.target_thread_id) === present(input.target_contact_account_id)) {
          return yield* invalid({ target_thread_id: ["Exactly one of target_thread_id or target_contact_account_id is required."] })
        }
        const key = input.idempotency_key ?? undefined
        const { idempotency_key: _, ...body } = input
        const hash = requestHash({ ...body, message_id: id })
        if (key !== undefined) {
          const earlier = yield* earlierAnswer(actor.userId, "forward", key, hash)
          if (Option.isSome(earlier)) return replayed(earlier.value)
        }
        if (source.deleted_at !== null) return yield* ruleViolation("message_deleted", "The message was deleted and cannot be forwarded.")
        const sourceAttachments = (yield* repo.attachments(company.id, [source.id])).get(source.id) ?? []
        if (
          notForwardable.has(source.message_type) || sourceAttachments.some((a) => unfetchable.has(a.type)) ||
          (!hasText(source.message_content) && sourceAttachments.length === 0)
        ) {
          return yield* ruleViolation("message_not_forwardable", `A ${source.message_type} message cannot be forwarded.`)
        }

        let channel: ChannelRow
        let existing: ThreadContext | null = null
        let account: { readonly id: number; readonly contact_id: number } | null = null
        if (present(input.target_thread_id)) {
          existing = yield* visibleThread(company.id, input.target_thread_id)
          if (present(input.target_channel_id) && input.target_channel_id !== existing.channel_id) {
            return yield* ruleViolation("channel_incompatible", "The target thread is on another channel than target_channel_id.")
          }
          channel = Option.getOrThrow(yield* repo.channel(company.id, existing.channel_id))
        } else {
          const found = yield* repo.account(company.id, input.target_contact_account_id!)
          if (Option.isNone(found)) return yield* notFound("Contact account not found.")
          account = found.value
          channel = yield* forwardChannel(company.id, found.value.channel_type, found.value.id, input.target_channel_id)
          const threadRef = yield* repo.threadOf(company.id, channel.id, found.value.id)
          if (Option.isSome(threadRef)) existing = Option.getOrNull(yield* repo.threadContext(company.id, threadRef.value.id))
        }
        if (channel.status !== "connected") {
          return yield* ruleViolation("channel_not_connected", "The target channel is not connected.")
        }
        if (existing !== null && existing.is_group) {
          return yield* ruleViolation("channel_not_textable", "The target is a comment thread; it takes replies, not forwarded messages.")
        }
        if (!carries[channel.type].has(source.message_type)) {
          return yield* ruleViolation("content_type_unsupported", `A ${channel.type} channel cannot carry a ${source.message_type} message.`)
        }
        const blocked = existing !== null
          ? existing.contact_blocked
          : Option.match(yield* repo.contact(company.id, account!.contact_id), { onNone: () => false, onSome: (c) => c.blocked })
        if (blocked) return yield* ruleViolation("contact_blocked", blockedMessage)
        const closed = windowClosed(channel.type, false, existing?.last_inbound_at ?? null, yield* Clock.currentTimeMillis)
        if (closed !== null) {
          const refusal = windowRefusal(channel.type, closed, true)
          return yield* ruleViolation(refusal.error_code, refusal.message)
        }
        const threadId = existing?.id ?? (yield* ensureThreadFor(company.id, channel.id, account!.id, account!.contact_id))
        const thread = existing ?? Option.getOrThrow(yield* repo.threadContext(company.id, threadId))
        // A stored file travels by its storage path; its signed link belongs to the source message.
        const attachments: ReadonlyArray<OutgoingAttachment> = sourceAttachments.map(({ id: _, ...a }) =>
          a.storage_path === null ? a : { ...a, url: null, thumbnail_url: null }
        )
        return yield* dispatch(thread, {
          endpoint: "forward",
          companyId: company.id,
          userId: actor.userId,
          messageType: source.message_type,
          text: source.message_content,
          attachments,
          quotedMessageId: null,
          quotedExternalMessageId: null,
          metadata: { forwarded_from_message_id: source.id },
          idempotency: key === undefined ? null : { key, hash }
        })
      })

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
        const { company, row } = yield* visibleMessage(id, "conversation.view")
        return yield* renderOne(company.id, row)
      })

      const around = Effect.fn("Messages.around")(function*(id: number, limit: number) {
        const { company, actor, row } = yield* visibleMessage(id, "conversation.view")
        yield* limiter.heavy(company.id, actor)
        const visible = yield* access.visible(company.id, actor)
        const { before, after } = yield* repo.around(company.id, visible, row, limit)
        const items = yield* render(company.id, [...before.slice(0, limit).reverse(), row, ...after.slice(0, limit)])
        return { items, anchor_id: row.id, has_more_before: before.length > limit, has_more_after: after.length > limit }
      })

      // ------------------------------------------------------------ changing

      const emitUpdated = (companyId: number, row: MessageRow, change: Change) =>
        Effect.gen(function*() {
          const message = yield* renderOne(companyId, row)
          yield* events.emit(companyId, "message.updated", updatedPayload(message, change))
          return message
        })

      const update = Effect.fn("Messages.update")(function*(id: number, input: UpdateMessage) {
        const { company, row } = yield* visibleMessage(id, "conversation.update")
        if (row.direction !== "outbound") return yield* ruleViolation("not_editable", "Only outbound messages can be edited.")
        if (row.deleted_at !== null) return yield* ruleViolation("message_deleted", "The message was deleted.")
        if (row.message_type !== "text") return yield* ruleViolation("not_editable", "Only text messages can be edited.")
        if (channelRules[row.channel_type].editWindowSeconds === null) {
          return yield* ruleViolation("edit_not_supported", `Messages on ${row.channel_type} cannot be edited.`)
        }
        const current = yield* renderOne(company.id, row)
        if (current.can_edit_until === null) return yield* ruleViolation("edit_window_closed", "The edit window of this message has closed.")
        const thread = Option.getOrThrow(yield* repo.threadContext(company.id, row.thread_id))
        if (row.external_message_id !== null) {
          if (thread.channel_status !== "connected") return yield* ruleViolation("channel_not_connected", "The channel is not connected.")
          const channel = contextOf(company.id, thread)
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
        const { company, row } = yield* visibleMessage(id, "conversation.update")
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
          const thread = Option.getOrThrow(yield* repo.threadContext(company.id, row.thread_id))
          if (row.external_message_id !== null) {
            if (thread.channel_status !== "connected") return yield* ruleViolation("channel_not_connected", "The channel is not connected.")
            const channel = contextOf(company.id, thread)
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
        const { company, row } = yield* visibleMessage(id, "conversation.view")
        return yield* repo.statuses(company.id, row.id)
      })

      const addStatus = Effect.fn("Messages.addStatus")(function*(id: number, input: RecordStatus) {
        const { company, row } = yield* visibleMessage(id, "conversation.update")
        if (row.direction !== "outbound") {
          return yield* ruleViolation("not_outbound", "Delivery statuses are recorded for outbound messages only.")
        }
        return yield* Effect.gen(function*() {
          const locked = Option.getOrThrow(yield* repo.findForUpdate(company.id, id))
          const entry = yield* repo.addStatus(company.id, id, input.status, input.error ?? null)
          const next = advances(locked.status, input.status)
          const updated = next ? yield* repo.update(company.id, id, { status: input.status }) : locked
          yield* emitUpdated(company.id, updated, "status")
          return entry
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      const reactions = Effect.fn("Messages.reactions")(function*(id: number) {
        const { company, row } = yield* visibleMessage(id, "conversation.view")
        return yield* repo.reactions(company.id, row.id)
      })

      /** Reactions are kept even when the provider refuses them: the operator's choice is recorded, the failure logged. */
      const pushReaction = (companyId: number, row: MessageRow, reaction: string | null) =>
        Effect.gen(function*() {
          if (row.external_message_id === null) return
          const thread = Option.getOrThrow(yield* repo.threadContext(companyId, row.thread_id))
          if (thread.channel_status !== "connected") return
          const channel = contextOf(companyId, thread)
          yield* providers.forChannel(channel).react(channel, recipientOf(thread), row.external_message_id, reaction).pipe(
            Effect.catchTag("ProviderError", (e) => Effect.logWarning("provider reaction failed", { code: e.code, message: e.message }))
          )
        })

      const reactionEvent = (row: MessageRow, action: "added" | "removed", reaction: Reaction | null, replaced: boolean) => ({
        message_id: row.id,
        conversation_id: row.conversation_id,
        thread_id: row.thread_id,
        channel_id: row.channel_id,
        action,
        replaced,
        reaction
      })

      const react = Effect.fn("Messages.react")(function*(id: number, input: SetReaction) {
        const { company, actor, row } = yield* visibleMessage(id, "conversation.update")
        if (present(input.author_user_id) && present(input.author_contact_account_id)) {
          return yield* invalid({ author_user_id: ["Give author_user_id or author_contact_account_id, not both."] })
        }
        if (present(input.author_user_id) && !(yield* repo.isMember(company.id, input.author_user_id))) {
          return yield* invalid({ author_user_id: ["The selected author user id is invalid."] })
        }
        if (present(input.author_contact_account_id) && Option.isNone(yield* repo.account(company.id, input.author_contact_account_id))) {
          return yield* invalid({ author_contact_account_id: ["The selected author contact account id is invalid."] })
        }
        if (row.deleted_at !== null) return yield* ruleViolation("message_deleted", "The message was deleted.")
        const authorUserId = present(input.author_contact_account_id) ? null : input.author_user_id ?? actor.userId
        const result = yield* Effect.gen(function*() {
          const result = yield* repo.setOutboundReaction(company.id, id, row.channel_id, {
            reaction: input.reaction,
            authorUserId,
            authorContactAccountId: input.author_contact_account_id ?? null
          })
          yield* events.emit(company.id, "message.reaction.updated", reactionEvent(row, "added", result.reaction, result.replaced))
          return result
        }).pipe(sql.withTransaction, Effect.orDie)
        yield* pushReaction(company.id, row, input.reaction)
        return result.reaction
      })

      const unreact = Effect.fn("Messages.unreact")(function*(id: number) {
        const { company, row } = yield* visibleMessage(id, "conversation.update")
        const removed = yield* Effect.gen(function*() {
          const removed = yield* repo.removeOutboundReaction(company.id, id, row.channel_id)
          if (Option.isSome(removed)) {
            yield* events.emit(company.id, "message.reaction.updated", reactionEvent(row, "removed", removed.value, false))
          }
          return Option.isSome(removed)
        }).pipe(sql.withTransaction, Effect.orDie)
        if (removed) yield* pushReaction(company.id, row, null)
        return removed
      })

      const like = Effect.fn("Messages.like")(function*(id: number) {
        const { company, row } = yield* visibleMessage(id, "conversation.update")
        const thread = Option.getOrThrow(yield* repo.threadContext(company.id, row.thread_id))
        if (!channelRules[row.channel_type].likes || !thread.is_group) {
          return yield* ruleViolation("not_a_comment", "Only comments in msgr_c_business comment threads can be liked.")
        }
        if (row.external_message_id === null) {
          return yield* ruleViolation("no_external_id", "The message has no provider id, so it cannot be liked.")
        }
        if (thread.channel_status !== "connected") return yield* ruleViolation("channel_not_connected", "The channel is not connected.")
        const channel = contextOf(company.id, thread)
        yield* providers.forChannel(channel).like(channel, thread.external_thread_id ?? "", row.external_message_id).pipe(
          Effect.mapError(providerFailed)
        )
      })

      // ------------------------------------------------------------ attachments

      const attachmentsOf = (companyId: number, messageId: number) =>
        Effect.map(repo.attachments(companyId, [messageId]), (all) => all.get(messageId) ?? [])

      const attachments = Effect.fn("Messages.attachments")(function*(id: number) {
        const { company, row } = yield* visibleMessage(id, "conversation.view")
        return yield* attachmentsOf(company.id, row.id)
      })

      const attach = Effect.fn("Messages.attach")(function*(id: number, input: AttachmentInput) {
        const { company, row } = yield* visibleMessage(id, "conversation.update")
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
        const { company, row } = yield* visibleMessage(id, "conversation.view")
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
        const thread = Option.getOrThrow(yield* repo.threadContext(company.id, row.thread_id))
        const channel = contextOf(company.id, thread)
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

      return Messages.of({
        attachments,
        attach,
        fetchAttachment,
        list,
        get,
        send,
        create,
        forward,
        update,
        remove,
        around,
        statuses,
        addStatus,
        reactions,
        react,
        unreact,
        like
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([MessagesRepo.layer, Idempotency.layer]))
}

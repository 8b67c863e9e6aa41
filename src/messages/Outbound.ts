import { Clock, Context, Effect, Layer, Option, Result } from "effect"
import { SqlClient } from "effect/sql"
import { ChannelAccess } from "../auth/ChannelAccess.ts"
import { type CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { Media } from "../media/Media.ts"
import { type ChannelType } from "../providers/Domain.ts"
import {
  Conflict,
  type Forbidden,
  invalidFields as invalid,
  type NotFound,
  notFound,
  ruleViolation,
  ServiceUnavailable,
  Unprocessable, orNotFound } from "../platform/Errors.ts"
import { invalidPhoneMessage, normalizePhone, phoneDigits } from "../platform/Phones.ts"
import { Idempotency, keyInFlight, keyMismatch, outcomeUnknownStatus, requestHash } from "../platform/Idempotency.ts"
import type { AttachmentInput, CreateMessage, ForwardMessage, Message, SendMessage, SendTarget } from "./Domain.ts"
import { MessagesRepo } from "./Repo.ts"
import { unfetchable } from "./Rules.ts"
import { messageTypeOf, Send } from "./Send.ts"
import { type OutgoingAttachment, SendRefusal, type SendUnavailable } from "./SendLane.ts"
import { checkSend } from "./SendRules.ts"
import { type ChannelRow, type ThreadContext, ThreadsRepo } from "./ThreadsRepo.ts"
import { Visibility } from "./Visibility.ts"

type SendFailure = Forbidden | NotFound | Unprocessable | Conflict | ServiceUnavailable

/** The wire answer of a refusal: a key in flight or of unknown outcome is 409, every other refusal the 422 rule body. */
export const refusalToWire = (e: SendRefusal) =>
  e.reason === "key_in_flight"
    ? new Conflict({ message: e.message })
    : e.reason === "outcome_unknown"
    ? new Conflict({ message: e.message, reason: e.reason })
    : new Unprocessable(e.error_code === undefined ? { message: e.message } : { message: e.message, error_code: e.error_code })

const toWire = <A, R>(effect: Effect.Effect<A, SendRefusal | SendUnavailable, R>) =>
  Effect.catchTags(effect, {
    SendRefusal: (e) => Effect.fail(refusalToWire(e)),
    SendUnavailable: (e) => Effect.fail(new ServiceUnavailable({ message: e.message }))
  })

const present = <A>(value: A | null | undefined): value is A => value !== null && value !== undefined

/** The target rule of every send: exactly one of thread_id, contact_id or to, and `to` naming someone. */
export const targetErrors = (input: SendTarget): Record<string, Array<string>> => {
  const targets = [input.thread_id, input.contact_id, input.to].filter(present).length
  if (targets !== 1) return { thread_id: ["Exactly one of thread_id, contact_id or to is required."] }
  if (present(input.to) && !present(input.to.external_id) && !hasText(input.to.phone) && !present(input.to.username)) {
    return { to: ["The to field needs one of external_id, phone or username."] }
  }
  return {}
}

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

const notForwardable = new Set(["reaction", "template", "ephemeral", "unsupported", "location", "contact"])

const phoneAddressed = (type: ChannelType) => type === "msgr_a" || type === "msgr_a_business"

const replayed = (body: unknown) => (body as { readonly data: Message }).data

/**
 * The HTTP fronts of outbound messages: send, direct create and forward (validation, target
 * resolution, idempotent replays), each handing its resolved send to `Send.one`.
 */
export class Outbound extends Context.Service<Outbound, {
  /**
   * The thread of a contact account on a channel of its type, created (with its conversation) when
   * missing: how a caller that addresses contacts gets the thread `Send.one` takes. None when either is not the company's.
   */
  threadFor(companyId: CompanyId, channelId: number, contactAccountId: number): Effect.Effect<Option.Option<ThreadContext>>
  /**
   * The thread a send addresses on a channel the caller may see (after `targetErrors` passed), with
   * the contact, account and thread created when needed.
   */
  target(companyId: CompanyId, channelId: number, target: SendTarget): Effect.Effect<ThreadContext, Forbidden | NotFound | Unprocessable, CurrentActor>
  /** The answer recorded for an earlier request with this key: 409 while it is in flight, 422 for another body. */
  replay(userId: number, endpoint: string, key: string, hash: string): Effect.Effect<Option.Option<Message>, Conflict | Unprocessable>
  send(input: SendMessage, key: string | undefined): Effect.Effect<Message, SendFailure, CurrentActor>
  create(input: CreateMessage): Effect.Effect<Message, SendFailure, CurrentActor>
  forward(id: number, input: ForwardMessage): Effect.Effect<Message, SendFailure, CurrentActor>
}>()("crm/messages/Outbound") {
  static readonly layerNoDeps = Layer.effect(
    Outbound,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* MessagesRepo
      const threads = yield* ThreadsRepo
      const visibility = yield* Visibility
      const access = yield* ChannelAccess
      const events = yield* Events
      const idempotency = yield* Idempotency
      const sender = yield* Send
      const media = yield* Media

      const earlierAnswer = Effect.fnUntraced(function*(userId: number, endpoint: string, key: string, hash: string) {
        const recorded = yield* idempotency.lookup({ userId, endpoint, key }, hash)
        switch (recorded._tag) {
          case "Replay":
            if (recorded.status === outcomeUnknownStatus) return yield* refusalToWire(SendRefusal.outcomeUnknown())
            return Option.some(recorded.body)
          case "Mismatch":
            return yield* keyMismatch()
          case "InFlight":
            // An abandoned key is settled by the entity (from the message it points to).
            return recorded.abandoned ? Option.none() : yield* keyInFlight()
          case "None":
            return Option.none()
        }
      })

      /** Contact, conversation and thread for a contact account on a channel, created when missing (one transaction). */
      const ensureThreadFor = (companyId: CompanyId, channelId: number, accountId: number, contactId: number) =>
        Effect.gen(function*() {
          const existing = yield* threads.threadOf(companyId, channelId, accountId)
          if (Option.isSome(existing)) return existing.value.id
          return yield* Effect.gen(function*() {
            const conversation = yield* threads.ensureConversation(companyId, contactId)
            const thread = yield* threads.ensureThread(companyId, {
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

      const ensureAccountFor = (companyId: CompanyId, channel: ChannelRow, externalId: string, profile: { phone?: string; username?: string }) =>
        Effect.gen(function*() {
          const account = yield* threads.ensureAccount(companyId, channel.type, externalId, {
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

      const threadFor = Effect.fn("Outbound.threadFor")(function*(companyId: CompanyId, channelId: number, contactAccountId: number) {
        const [channel, account] = yield* Effect.all([threads.channel(companyId, channelId), threads.account(companyId, contactAccountId)])
        if (Option.isNone(channel) || Option.isNone(account) || account.value.channel_type !== channel.value.type) return Option.none()
        const threadId = yield* ensureThreadFor(companyId, channelId, account.value.id, account.value.contact_id)
        return yield* threads.threadContext(companyId, threadId)
      })

      const resolveSendTarget = Effect.fnUntraced(function*(
        companyId: CompanyId,
        channel: ChannelRow,
        input: SendTarget,
        defaultCountry: string | null
      ) {
        if (present(input.thread_id)) {
          const thread = yield* threads.threadContext(companyId, input.thread_id)
          if (Option.isNone(thread)) return yield* notFound("Thread not found.")
          if (thread.value.channel_id !== channel.id) {
            return yield* invalid({ thread_id: ["The thread does not belong to the given channel."] })
          }
          return thread.value
        }
        let accountId: number
        let contactId: number
        if (present(input.contact_id)) {
          const contact = yield* threads.contact(companyId, input.contact_id)
          if (Option.isNone(contact)) return yield* notFound("Contact not found.")
          const accounts = yield* threads.accountsOfContact(companyId, input.contact_id, channel.type)
          if (accounts.length === 0) {
            const phone = contact.value.phones.map(phoneDigits).find((p) => p.length > 0)
            if (!phoneAddressed(channel.type) || phone === undefined) {
              return yield* invalid({ contact_id: [`The contact has no ${channel.type} account to send to.`] })
            }
            const account = yield* ensureAccountFor(companyId, channel, phone, { phone })
            if (account.contact_id !== input.contact_id) {
              return yield* invalid({ contact_id: ["The contact's phone number belongs to another contact's account."] })
            }
            accountId = account.id
          } else {
            const withThread = yield* Effect.findFirst(accounts, (a) => Effect.map(threads.threadOf(companyId, channel.id, a.id), Option.isSome))
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
            const e164 = normalizePhone(to.phone, defaultCountry)
            if (e164 === undefined) return yield* invalid({ "to.phone": [invalidPhoneMessage("to.phone field", defaultCountry)] })
            const phone = phoneDigits(e164)
            const found = yield* threads.findAccount(companyId, channel.type, { phone })
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
            const found = yield* threads.findAccount(companyId, channel.type, { username: to.username!.replace(/^@/, "") })
            if (Option.isNone(found)) {
              return yield* invalid({ "to.username": [`No ${channel.type} account with this username is known.`] })
            }
            accountId = found.value.id
            contactId = found.value.contact_id
          }
        }
        const threadId = yield* ensureThreadFor(companyId, channel.id, accountId, contactId)
        const thread = yield* threads.threadContext(companyId, threadId)
        return yield* orNotFound(thread)
      })

      const knownThread = (companyId: CompanyId, input: SendTarget) =>
        present(input.thread_id) ? threads.threadContext(companyId, input.thread_id) : Effect.succeedNone

      /** A known thread on its own channel is the target as it is; anything else resolves the channel first, so that its errors come in the documented order. */
      const targetFrom = Effect.fnUntraced(function*(companyId: CompanyId, channelId: number, input: SendTarget, known: Option.Option<ThreadContext>) {
        const actor = yield* CurrentActor
        return Option.isSome(known) && known.value.channel_id === channelId && !known.value.channel_deleted &&
            (yield* access.canSee(companyId, actor, known.value.channel_id))
          ? known.value
          : yield* resolveSendTarget(companyId, yield* visibility.channel(companyId, channelId), input, actor.company?.defaultCountry ?? null)
      })

      const target = Effect.fn("Outbound.target")(function*(companyId: CompanyId, channelId: number, input: SendTarget) {
        return yield* targetFrom(companyId, channelId, input, yield* knownThread(companyId, input))
      })

      const replay = Effect.fn("Outbound.replay")(function*(userId: number, endpoint: string, key: string, hash: string) {
        return Option.map(yield* earlierAnswer(userId, endpoint, key, hash), replayed)
      })

      /** The send's attachment rows resolved against the company's uploads and stickers. */
      const outgoing = (companyId: CompanyId, rows: ReadonlyArray<AttachmentInput>): Effect.Effect<ReadonlyArray<OutgoingAttachment>, Unprocessable> =>
        rows.length === 0 ? Effect.succeed([]) : media.resolve(companyId, rows)

      const send = Effect.fn("Outbound.send")(function*(input: SendMessage, key: string | undefined) {
        const company = yield* requirePermission("conversation.create")
        const actor = yield* CurrentActor
        const errors = { ...contentErrors(input), ...targetErrors(input) }
        if (Object.keys(errors).length > 0) return yield* invalid(errors)
        const hash = requestHash(input)
        // The hot path (a known thread on its own channel) reads it alongside the key.
        const [earlier, known] = yield* Effect.all([
          key === undefined ? Effect.succeedNone : earlierAnswer(actor.userId, "send", key, hash),
          knownThread(company.id, input)
        ], { concurrency: 2 })
        if (Option.isSome(earlier)) return replayed(earlier.value)
        const thread = yield* targetFrom(company.id, input.channel_id, input, known)
        const attachments = yield* outgoing(company.id, sourcesOf(input))
        return yield* sender.one({
          thread,
          endpoint: "send",
          companyId: company.id,
          userId: actor.userId,
          messageType: messageTypeOf({ attachments }),
          text: input.text ?? null,
          attachments,
          quotedMessageId: null,
          quotedExternalMessageId: null,
          metadata: {},
          idempotency: key === undefined ? null : { key, hash }
        }).pipe(toWire)
      })

      const create = Effect.fn("Outbound.create")(function*(input: CreateMessage) {
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
        const thread = yield* visibility.thread(company.id, input.thread_id)
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
        const attachments = yield* outgoing(company.id, sourcesOf(input))
        return yield* sender.one({
          thread,
          endpoint: "create",
          companyId: company.id,
          userId: actor.userId,
          messageType: messageTypeOf({ attachments }),
          text: input.text ?? null,
          attachments,
          quotedMessageId,
          quotedExternalMessageId: quotedExternal,
          metadata: quotedExternal !== null && quotedMessageId === null ? { quoted_external_message_id: quotedExternal } : {},
          idempotency: key === undefined ? null : { key, hash }
        }).pipe(toWire)
      })

      /** Picks the forward's target channel (the first three forward refusal codes). */
      const forwardChannel = Effect.fnUntraced(function*(
        companyId: CompanyId,
        accountType: string,
        accountId: number,
        requested: number | null | undefined
      ) {
        if (present(requested)) {
          const channel = yield* visibility.channel(companyId, requested)
          if (channel.type !== accountType) {
            return yield* ruleViolation("channel_incompatible", `The target channel is ${channel.type}; the contact account is on ${accountType}.`)
          }
          return channel
        }
        const actor = yield* CurrentActor
        const visible = yield* access.visible(companyId, actor)
        const candidates = (yield* threads.channelsOfType(companyId, accountType)).filter((c) => visible === "all" || visible.has(c.id))
        if (candidates.length === 0) {
          return yield* ruleViolation("no_compatible_channel", `No ${accountType} channel is available to reach this contact account.`)
        }
        const found = (yield* threads.threadsOfAccount(companyId, accountId)).filter((t) => candidates.some((c) => c.id === t.channel_id))
        if (found.length === 1) return candidates.find((c) => c.id === found[0].channel_id)!
        if (candidates.length === 1) return candidates[0]
        return yield* ruleViolation("channel_required", `Several ${accountType} channels can reach this contact account; give target_channel_id.`)
      })

      /** The forward's target: its channel, and the thread on it or the contact account a thread is created for. */
      const forwardTarget = Effect.fnUntraced(function*(companyId: CompanyId, input: ForwardMessage) {
        if (present(input.target_thread_id)) {
          const existing = yield* visibility.thread(companyId, input.target_thread_id)
          if (present(input.target_channel_id) && input.target_channel_id !== existing.channel_id) {
            return yield* ruleViolation("channel_incompatible", "The target thread is on another channel than target_channel_id.")
          }
          const channel = yield* orNotFound(yield* threads.channel(companyId, existing.channel_id))
          return { channel, existing, account: null }
        }
        const found = yield* threads.account(companyId, input.target_contact_account_id!)
        if (Option.isNone(found)) return yield* notFound("Contact account not found.")
        const account = found.value
        const channel = yield* forwardChannel(companyId, account.channel_type, account.id, input.target_channel_id)
        const threadRef = yield* threads.threadOf(companyId, channel.id, account.id)
        const existing = Option.isSome(threadRef) ? Option.getOrNull(yield* threads.threadContext(companyId, threadRef.value.id)) : null
        return { channel, existing, account }
      })

      const forward = Effect.fn("Outbound.forward")(function*(id: number, input: ForwardMessage) {
        const { company, actor, row: source } = yield* visibility.message(id, "conversation.create")
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

        const { channel, existing, account } = yield* forwardTarget(company.id, input)
        // The rules before a thread is created for the forward: a new thread has no inbound yet.
        const verdict = checkSend({
          channel_type: channel.type,
          channel_status: channel.status,
          is_group: existing?.is_group ?? false,
          contact_blocked: existing !== null
            ? existing.contact_blocked
            : Option.match(yield* threads.contact(company.id, account!.contact_id), { onNone: () => false, onSome: (c) => c.blocked }),
          last_inbound_at: existing?.last_inbound_at ?? null,
          external_thread_id: existing?.external_thread_id ?? null,
          account_external_id: existing?.account_external_id ?? account?.external_id ?? null
        }, { forward: true, types: [source.message_type], template: false }, yield* Clock.currentTimeMillis)
        if (Result.isFailure(verdict)) return yield* refusalToWire(verdict.failure)
        const threadId = existing?.id ?? (yield* ensureThreadFor(company.id, channel.id, account!.id, account!.contact_id))
        const thread = existing ?? (yield* orNotFound(yield* threads.threadContext(company.id, threadId)))
        // A stored file travels by its storage path; its signed link belongs to the source message.
        const attachments: ReadonlyArray<OutgoingAttachment> = sourceAttachments.map(({ id: _, ...a }) =>
          a.storage_path === null ? a : { ...a, url: null, thumbnail_url: null }
        )
        return yield* sender.one({
          thread,
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
        }).pipe(toWire)
      })

      return Outbound.of({ threadFor, target, replay, send, create, forward })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide([Visibility.layer, MessagesRepo.layer, ThreadsRepo.layer, Idempotency.layer, Send.layer])
  )
}

import { Clock, Config, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { ChannelContext, InboundMessage, InboundStatus } from "../providers/Provider.ts"
import { Events } from "../events/Events.ts"
import { AttachmentTypes, canonicalType } from "./Domain.ts"
import { CompanyId } from "../auth/Domain.ts"
import { MessagesRepo, toMessage } from "./Repo.ts"
import { ThreadsRepo } from "./ThreadsRepo.ts"
import { type NewAttachment } from "../media/Domain.ts"
import { advances, createdPayload, defaultStopWords, isStopWord, referencedMessage, referralFor, updatedPayload } from "./Rules.ts"
import { Settlement } from "./Settlement.ts"
import { makeAutoCreate } from "../deals/Settings.ts"
import { orNotFound } from "../platform/Errors.ts"

const attachmentType = (type: string) => ((AttachmentTypes as ReadonlyArray<string>).includes(type) ? type : "unsupported_type")

/**
 * Ingestion of what providers deliver. Each inbound message is one transaction: the sender's
 * contact account (and a `lead` contact), the conversation, the thread, the message and its
 * attachments, the thread's window, a stop-word opt-out and the events.
 */
export class Inbound extends Context.Service<Inbound, {
  receive(channel: ChannelContext, message: InboundMessage): Effect.Effect<{ readonly messageId: number; readonly conversationId: number; readonly duplicate: boolean }>
  status(channel: ChannelContext, status: InboundStatus): Effect.Effect<void>
}>()("crm/messages/Inbound") {
  static readonly layerNoDeps = Layer.effect(
    Inbound,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* MessagesRepo
      const threads = yield* ThreadsRepo
      const events = yield* Events
      const autoCreateDeal = yield* makeAutoCreate
      const settlement = yield* Settlement
      const extra: string = yield* Effect.orDie(Config.String("STOP_WORDS").pipe(Config.withDefault("")))
      const stopWords: ReadonlySet<string> = new Set([
        ...defaultStopWords,
        ...extra.split(",").map((w) => w.trim().toLowerCase()).filter((w) => w !== "")
      ])

      const rendered = Effect.fnUntraced(function*(companyId: CompanyId, id: number) {
        const row = yield* orNotFound(yield* repo.find(companyId, id))
        const attachments = yield* repo.attachments(companyId, [id])
        return toMessage(row, attachments.get(id) ?? [], yield* Clock.currentTimeMillis)
      })

      const receive = Effect.fn("Inbound.receive")(function*(channel: ChannelContext, msg: InboundMessage) {
        const companyId = CompanyId.make(channel.companyId)
        return yield* Effect.gen(function*() {
          if (msg.edited === true && msg.externalMessageId !== null) {
            const earlier = yield* repo.findByExternal(companyId, channel.id, msg.externalMessageId, "inbound")
            if (Option.isSome(earlier)) {
              const updated = yield* repo.update(companyId, earlier.value.id, { content: msg.text, edited: true })
              yield* events.emit(companyId, "message.updated", updatedPayload(yield* rendered(companyId, updated.id), "edited"))
              return { messageId: updated.id, conversationId: updated.conversation_id, duplicate: false }
            }
          }
          const isReaction = msg.messageType === "reaction" && msg.reaction !== undefined
          if (msg.externalMessageId !== null && !isReaction) {
            // Providers redeliver; the lock makes two concurrent deliveries of one id see each other.
            yield* repo.lockExternal(companyId, channel.id, msg.externalMessageId)
            const seen = yield* repo.findByExternal(companyId, channel.id, msg.externalMessageId, "inbound")
            if (Option.isSome(seen)) return { messageId: seen.value.id, conversationId: seen.value.conversation_id, duplicate: true }
          }

          const account = yield* threads.ensureAccount(companyId, channel.type, msg.from.external_id, {
            username: msg.from.username ?? null,
            name: msg.from.name ?? null,
            phone: msg.from.phone ?? null,
            profilePicture: msg.from.profile_picture ?? null
          })
          const group = msg.thread !== null && msg.thread.is_group
          // A comment thread belongs to the conversation of whoever wrote in it first; later
          // commenters' messages join that thread without a conversation of their own.
          const existingGroup = group ? yield* threads.groupThread(companyId, channel.id, msg.thread!.external_id) : Option.none()
          let conversationCreated = false
          let thread: { readonly id: number; readonly conversation_id: number }
          if (Option.isSome(existingGroup)) {
            thread = existingGroup.value
          } else {
            const conversation = yield* threads.ensureConversation(companyId, account.contact_id)
            conversationCreated = conversation.created
            thread = yield* threads.ensureThread(companyId, {
              channelId: channel.id,
              conversationId: conversation.id,
              accountId: account.id,
              externalThreadId: msg.thread?.external_id ?? null,
              group
            })
          }
          const conversationId = thread.conversation_id
          const { first } = yield* threads.touchInbound(companyId, thread.id, conversationId, msg.timestamp)

          const pending: Array<readonly [string, unknown]> = []
          if (account.created) {
            pending.push(["contact.created", {
              contact: { id: account.contact_id, status: "lead" },
              contact_id: account.contact_id,
              source: "inbound",
              channel_id: channel.id
            }])
          }
          if (conversationCreated) {
            pending.push(["conversation.created", {
              conversation: { id: conversationId, contact_id: account.contact_id },
              conversation_id: conversationId,
              contact_id: account.contact_id,
              channel_id: channel.id,
              thread_id: thread.id
            }])
          }
          const listed = () => pending.map(([key, payload]) => ({ key, payload }))
          const flush = () => events.emitMany(companyId, listed())

          if (isReaction) {
            const target = yield* repo.findByExternal(companyId, channel.id, msg.reaction!.externalMessageId, null)
            if (Option.isSome(target)) {
              const result = yield* repo.setInboundReaction(companyId, target.value.id, channel.id, account.id, msg.reaction!.emoji)
              yield* flush()
              if (result.reaction !== null || result.removed) {
                yield* events.emit(companyId, "message.reaction.updated", {
                  message_id: target.value.id,
                  conversation_id: target.value.conversation_id,
                  thread_id: target.value.thread_id,
                  channel_id: target.value.channel_id,
                  action: result.reaction !== null ? "added" : "removed",
                  replaced: false,
                  reaction: result.reaction
                })
              }
              return { messageId: target.value.id, conversationId: target.value.conversation_id, duplicate: false }
            }
          }

          const quoted = msg.quotedExternalMessageId === null
            ? Option.none()
            : yield* repo.findByExternal(companyId, channel.id, msg.quotedExternalMessageId, null)
          const attachments: ReadonlyArray<NewAttachment> = msg.attachments.map((a) => ({
            type: attachmentType(a.type),
            mime_type: a.mime_type,
            url: a.url,
            thumbnail_url: a.thumbnail_url,
            storage_path: null,
            media_id: null,
            sticker_id: null,
            file_name: a.file_name,
            size: null
          }))
          const metadata: Record<string, unknown> = {}
          // The provider's media reference of attachment i (attachments ordered by id) for a later fetch.
          if (msg.attachments.some((a) => a.provider_ref !== null)) metadata.attachment_refs = msg.attachments.map((a) => a.provider_ref)
          if (msg.quotedExternalMessageId !== null && Option.isNone(quoted)) metadata.quoted_external_message_id = msg.quotedExternalMessageId
          if (msg.reaction !== undefined) metadata.reaction = msg.reaction
          const created = yield* repo.insert(companyId, {
            conversationId,
            threadId: thread.id,
            channelId: channel.id,
            direction: "inbound",
            messageType: canonicalType(msg.messageType),
            content: msg.text,
            externalMessageId: msg.externalMessageId,
            externalThreadId: msg.thread?.external_id ?? null,
            status: null,
            senderUserId: null,
            contactAccountId: account.id,
            quotedMessageId: Option.match(quoted, { onNone: () => null, onSome: (q) => q.id }),
            referral: first ? referralFor(channel.type, msg.referral) : null,
            metadata,
            timestamp: msg.timestamp,
            attachments
          })
          if (isStopWord(stopWords, msg.text)) {
            const optedOut = yield* repo.optOut(companyId, account.contact_id)
            if (Option.isSome(optedOut)) {
              pending.push(["contact.opted_out", {
                contact_id: account.contact_id,
                opted_out_at: optedOut.value.toISOString(),
                source: "stop_word",
                message_id: created.row.id
              }])
            }
          }
          const message = toMessage(created.row, created.attachments, yield* Clock.currentTimeMillis)
          const messageCreated = { key: "message.created", payload: createdPayload(message) }
          if (first) {
            // A deal the first message opens comes between the contact's and conversation's events and the message's.
            yield* flush()
            yield* autoCreateDeal(companyId, conversationId, { channelId: channel.id })
          }
          yield* events.emitMany(companyId, [...(first ? [] : listed()), messageCreated])
          return { messageId: created.row.id, conversationId, duplicate: false }
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      /**
       * A status for a message whose send was cut off before it recorded the provider's id: found by the
       * reference the provider echoes, it is the send's outcome (its key answers it from then on).
       */
      const settleReferenced = Effect.fnUntraced(function*(companyId: CompanyId, channel: ChannelContext, s: InboundStatus) {
        const messageId = referencedMessage(s.reference)
        if (messageId === null) return
        const row = yield* repo.findForUpdate(companyId, messageId)
        if (Option.isNone(row) || row.value.channel_id !== channel.id || row.value.direction !== "outbound") return
        if (row.value.external_message_id !== null || !(yield* settlement.cutOff(row.value))) return
        yield* settlement.record(companyId, row.value, { status: s.status, externalMessageId: s.externalMessageId, error: s.error })
      })

      const status = Effect.fn("Inbound.status")(function*(channel: ChannelContext, s: InboundStatus) {
        const companyId = CompanyId.make(channel.companyId)
        yield* Effect.gen(function*() {
          const found = yield* repo.findByExternal(companyId, channel.id, s.externalMessageId, "outbound")
          if (Option.isNone(found)) return yield* settleReferenced(companyId, channel, s)
          const locked = yield* orNotFound(yield* repo.findForUpdate(companyId, found.value.id))
          yield* repo.addStatus(companyId, locked.id, s.status, s.error)
          const row = advances(locked.status, s.status) ? yield* repo.update(companyId, locked.id, { status: s.status }) : locked
          const attachments = yield* repo.attachments(companyId, [row.id])
          const message = toMessage(row, attachments.get(row.id) ?? [], yield* Clock.currentTimeMillis)
          yield* events.emit(companyId, "message.updated", updatedPayload(message, "status"))
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      return Inbound.of({ receive, status })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([MessagesRepo.layer, ThreadsRepo.layer, Settlement.layer]))
}

import { Context, Effect, Layer, Option, Schema } from "effect"
import { HttpClientRequest } from "effect/http"
import { AppConfig } from "../platform/Config.ts"
import {
  type ChannelContext,
  type InboundMessage,
  type OutboundAttachment,
  type OutboundMessage,
  ProviderError,
  ProviderThrottled,
  type RawAdapter,
  type SentMessage
} from "./Provider.ts"
import {
  contentTypeOf,
  decodeAs,
  makeProviderHttp,
  notSupported,
  parseJson,
  type RawAnswer,
  rejected,
  unavailable
} from "./ProviderHttp.ts"

// ---------------------------------------------------------------------------
// Bot API shapes (https://core.telegram.org/bots/api): only the fields we read.

const TgUser = Schema.Struct({
  id: Schema.Number,
  is_bot: Schema.optional(Schema.Boolean),
  first_name: Schema.optional(Schema.String),
  last_name: Schema.optional(Schema.String),
  username: Schema.optional(Schema.String)
})
const TgChat = Schema.Struct({ id: Schema.Number, type: Schema.String, title: Schema.optional(Schema.String) })
const TgFile = Schema.Struct({
  file_id: Schema.String,
  file_name: Schema.optional(Schema.String),
  mime_type: Schema.optional(Schema.String)
})
const TgSticker = Schema.Struct({
  file_id: Schema.String,
  emoji: Schema.optional(Schema.String),
  is_animated: Schema.optional(Schema.Boolean),
  is_video: Schema.optional(Schema.Boolean)
})
const TgMessage = Schema.Struct({
  message_id: Schema.Number,
  from: Schema.optional(TgUser),
  chat: TgChat,
  date: Schema.Number,
  text: Schema.optional(Schema.String),
  caption: Schema.optional(Schema.String),
  photo: Schema.optional(Schema.Array(TgFile)),
  document: Schema.optional(TgFile),
  voice: Schema.optional(TgFile),
  audio: Schema.optional(TgFile),
  video: Schema.optional(TgFile),
  sticker: Schema.optional(TgSticker),
  reply_to_message: Schema.optional(Schema.Struct({ message_id: Schema.Number }))
})
type TgMessage = typeof TgMessage.Type

export const TelegramUpdate = Schema.Struct({
  update_id: Schema.Number,
  message: Schema.optional(TgMessage),
  edited_message: Schema.optional(TgMessage)
})
export type TelegramUpdate = typeof TelegramUpdate.Type

const TgAnswer = Schema.Struct({
  ok: Schema.Boolean,
  result: Schema.optional(Schema.Unknown),
  description: Schema.optional(Schema.String),
  error_code: Schema.optional(Schema.Number),
  parameters: Schema.optional(Schema.Struct({ retry_after: Schema.optional(Schema.Number) }))
})
const TgSent = Schema.Struct({ message_id: Schema.Number, chat: TgChat })
const TgFilePath = Schema.Struct({ file_path: Schema.String })
const TgMe = Schema.Struct({ id: Schema.Number, username: Schema.optional(Schema.String) })

/** getStickerSet's StickerSet, with the fields of each Sticker the set import reads. */
const TgStickerSet = Schema.Struct({
  name: Schema.String,
  title: Schema.String,
  sticker_type: Schema.optional(Schema.String),
  stickers: Schema.Array(Schema.Struct({
    file_id: Schema.String,
    file_unique_id: Schema.optional(Schema.String),
    width: Schema.optional(Schema.Number),
    height: Schema.optional(Schema.Number),
    is_animated: Schema.Boolean,
    is_video: Schema.Boolean,
    emoji: Schema.optional(Schema.String)
  }))
})
export type TelegramStickerSet = typeof TgStickerSet.Type

const decodeAnswer = decodeAs(TgAnswer)
const decodeStickerSet = decodeAs(TgStickerSet)
const decodeSent = decodeAs(TgSent)
const decodeFilePath = decodeAs(TgFilePath)
const decodeMe = decodeAs(TgMe)

// ---------------------------------------------------------------------------
// Ids: Telegram numbers messages per chat, so ours carry the chat: `<chat_id>:<message_id>`.

export const externalMessageId = (chatId: number | string, messageId: number) => `${chatId}:${messageId}`

const messageIdOf = (external: string): Effect.Effect<number, ProviderError> => {
  const raw = external.slice(external.lastIndexOf(":") + 1)
  const id = Number(raw)
  return /^\d{1,15}$/.test(raw) && id > 0
    ? Effect.succeed(id)
    : Effect.fail(rejected("The message id is not a Telegram message id."))
}

export const botTokenPattern = /^\d{1,20}:[A-Za-z0-9_-]{20,200}$/

// ---------------------------------------------------------------------------
// Inbound: an update's `message` / `edited_message` as the ingestion service wants it.

const attachment = (type: string, fileId: string, mime: string | null, fileName: string | null) => ({
  type,
  mime_type: mime,
  url: null,
  provider_ref: fileId,
  thumbnail_url: null,
  file_name: fileName
})

const contentOf = (m: TgMessage): { readonly messageType: string; readonly attachments: InboundMessage["attachments"] } => {
  if (m.photo !== undefined && m.photo.length > 0) {
    // Sizes come smallest first; the last one is the original.
    return { messageType: "image", attachments: [attachment("image", m.photo[m.photo.length - 1].file_id, "image/jpeg", null)] }
  }
  if (m.sticker !== undefined) {
    const mime = m.sticker.is_animated ? "application/x-tgsticker" : m.sticker.is_video ? "video/webm" : "image/webp"
    return { messageType: "sticker", attachments: [attachment("sticker", m.sticker.file_id, mime, null)] }
  }
  const files: ReadonlyArray<readonly [string, typeof TgFile.Type | undefined, string | null]> = [
    ["voice", m.voice, "audio/ogg"],
    ["audio", m.audio, null],
    ["video", m.video, "video/mp4"],
    ["document", m.document, null]
  ]
  for (const [type, file, fallback] of files) {
    if (file !== undefined) {
      return { messageType: type, attachments: [attachment(type, file.file_id, file.mime_type ?? fallback, file.file_name ?? null)] }
    }
  }
  return { messageType: m.text !== undefined ? "text" : "unsupported_type", attachments: [] }
}

/** None for updates we do not ingest (no sender, or kinds other than message / edited_message). */
export const normalizeUpdate = (update: TelegramUpdate): Option.Option<InboundMessage> => {
  const edited = update.message === undefined && update.edited_message !== undefined
  const m = update.message ?? update.edited_message
  if (m === undefined || m.from === undefined) return Option.none()
  const name = [m.from.first_name, m.from.last_name].filter((part) => part !== undefined && part !== "").join(" ")
  const content = contentOf(m)
  return Option.some({
    externalMessageId: externalMessageId(m.chat.id, m.message_id),
    from: {
      external_id: String(m.from.id),
      username: m.from.username ?? null,
      name: name === "" ? null : name,
      phone: null,
      profile_picture: null
    },
    text: m.text ?? m.caption ?? null,
    messageType: content.messageType,
    attachments: content.attachments,
    referral: null,
    thread: m.chat.type === "private" ? null : { external_id: String(m.chat.id), is_group: true },
    quotedExternalMessageId: m.reply_to_message === undefined ? null : externalMessageId(m.chat.id, m.reply_to_message.message_id),
    timestamp: new Date(m.date * 1000),
    ...(edited ? { edited: true } : {})
  })
}

// ---------------------------------------------------------------------------
// Outbound

const mediaMethod = (type: string): readonly [method: string, field: string] => {
  switch (type) {
    case "image":
    case "photo":
      return ["sendPhoto", "photo"]
    case "voice":
      return ["sendVoice", "voice"]
    case "audio":
      return ["sendAudio", "audio"]
    case "video":
      return ["sendVideo", "video"]
    case "sticker":
      return ["sendSticker", "sticker"]
    default:
      return ["sendDocument", "document"]
  }
}

const captionLimit = 1024

export class TelegramApi extends Context.Service<TelegramApi, {
  readonly adapter: RawAdapter
  /** Checks the token (getMe) and points the bot's webhook at `url` with `secret` as its secret token. */
  registerWebhook(channel: ChannelContext, url: string, secret: string): Effect.Effect<{ readonly username: string | null }, ProviderError>
  /** A sticker set by name (getStickerSet); None when Telegram answers that no such set exists. */
  getStickerSet(channel: ChannelContext, name: string): Effect.Effect<Option.Option<TelegramStickerSet>, ProviderError>
}>()("crm/channels/TelegramApi") {
  static readonly layer = Layer.effect(
    TelegramApi,
    Effect.gen(function*() {
      const http = yield* makeProviderHttp
      const config = yield* AppConfig
      const base = config.telegramApiBase.replace(/\/+$/, "")

      const tokenOf = (channel: ChannelContext) => {
        const token = channel.credentials.bot_token
        return token !== undefined && botTokenPattern.test(token)
          ? Effect.succeed(token)
          : Effect.fail(rejected("The channel has no valid bot token."))
      }

      const failure = (answer: RawAnswer): ProviderError | ProviderThrottled => {
        const parsed = Option.flatMap(parseJson(answer), decodeAnswer)
        const description = Option.match(parsed, {
          onNone: () => `Telegram answered HTTP ${answer.status}.`,
          onSome: (a) => a.description ?? `Telegram answered HTTP ${answer.status}.`
        })
        const code = Option.match(parsed, { onNone: () => answer.status, onSome: (a) => a.error_code ?? answer.status })
        if (code === 429) {
          // The Bot API says how long to wait in `parameters.retry_after` (seconds); without it, a second.
          const seconds = Option.getOrUndefined(parsed)?.parameters?.retry_after
          const retryAfterMs = seconds !== undefined && Number.isFinite(seconds) && seconds > 0 ? Math.ceil(seconds * 1000) : 1000
          return new ProviderThrottled({ scope: "channel", retryAfterMs, message: description })
        }
        return code >= 500 ? unavailable(description) : rejected(description)
      }

      const call = (token: string, method: string, body: Record<string, unknown> | FormData) => {
        const request = HttpClientRequest.post(`${base}/bot${token}/${method}`).pipe(
          body instanceof FormData ? HttpClientRequest.bodyFormData(body) : HttpClientRequest.bodyJsonUnsafe(body)
        )
        return Effect.flatMap(http.execute(request, "Telegram"), (answer): Effect.Effect<unknown, ProviderError | ProviderThrottled> => {
          const parsed = Option.flatMap(parseJson(answer), decodeAnswer)
          if (Option.isSome(parsed) && parsed.value.ok && answer.status < 300) return Effect.succeed(parsed.value.result)
          return Effect.fail(failure(answer))
        })
      }

      /** A call outside sending: a throttle answer is one more way of being unavailable. */
      const callOnce = (token: string, method: string, body: Record<string, unknown> | FormData) =>
        call(token, method, body).pipe(Effect.catchTag("ProviderThrottled", (t) => Effect.fail(unavailable(t.message))))

      const sentOf = (result: unknown) =>
        Option.match(decodeSent(result), {
          onNone: () => Effect.fail(unavailable("Telegram answered without the sent message.")),
          onSome: Effect.succeed
        })

      const replyTo = (quoted: string | null) =>
        quoted === null
          ? Effect.succeed({})
          : Effect.map(messageIdOf(quoted), (id) => ({ reply_parameters: { message_id: id, allow_sending_without_reply: true } }))

      const sendMedia = Effect.fnUntraced(function*(
        token: string,
        chatId: string,
        item: OutboundAttachment,
        caption: string | null,
        reply: Record<string, unknown>
      ) {
        const [method, field] = mediaMethod(item.type)
        if (item.url !== null) {
          return yield* call(token, method, {
            chat_id: chatId,
            [field]: item.url,
            ...(caption !== null ? { caption } : {}),
            ...reply
          })
        }
        if (item.storage_path === null) return yield* rejected("The attachment has neither a file nor a URL.")
        const bytes = yield* http.readLocal(item.storage_path)
        const form = new FormData()
        form.append("chat_id", chatId)
        form.append(field, new Blob([bytes], { type: item.mime_type ?? "application/octet-stream" }), item.file_name ?? field)
        if (caption !== null) form.append("caption", caption)
        if ("reply_parameters" in reply) form.append("reply_parameters", JSON.stringify(reply.reply_parameters))
        return yield* call(token, method, form)
      })

      const send = Effect.fnUntraced(function*(channel: ChannelContext, message: OutboundMessage) {
        if (message.template !== undefined) return yield* notSupported("Telegram has no message templates.")
        const token = yield* tokenOf(channel)
        const text = message.text !== null && message.text.trim() !== "" ? message.text : null
        const items = message.attachments
        if (items.length === 0 && text === null) return yield* rejected("There is nothing to send.")
        const reply = yield* replyTo(message.quotedExternalMessageId)
        const captioned = items.length === 1 && items[0].type !== "sticker" && (text === null || text.length <= captionLimit)
        const results: Array<unknown> = []
        if (text !== null && !captioned) {
          results.push(yield* call(token, "sendMessage", { chat_id: message.recipient, text, ...reply }))
        }
        for (const item of items) {
          const first = results.length === 0
          const media = sendMedia(token, message.recipient, item, captioned ? text : null, first ? reply : {})
          // Once a part is delivered the send cannot be made again without doubling it: a later throttle is a failure.
          results.push(yield* first ? media : media.pipe(Effect.catchTag("ProviderThrottled", (t) => Effect.fail(unavailable(t.message)))))
        }
        const sent = yield* sentOf(results[0])
        return {
          externalMessageId: externalMessageId(sent.chat.id, sent.message_id),
          externalThreadId: sent.chat.type === "private" ? null : String(sent.chat.id),
          status: "sent"
        } satisfies SentMessage
      })

      const edit = Effect.fnUntraced(function*(channel: ChannelContext, recipient: string, external: string, text: string) {
        const token = yield* tokenOf(channel)
        const messageId = yield* messageIdOf(external)
        yield* callOnce(token, "editMessageText", { chat_id: recipient, message_id: messageId, text }).pipe(
          // Saving the same text again is not an error for us.
          Effect.catchIf((e) => e.message.includes("message is not modified"), () => Effect.void)
        )
      })

      const revoke = Effect.fnUntraced(function*(channel: ChannelContext, recipient: string, external: string) {
        const token = yield* tokenOf(channel)
        const messageId = yield* messageIdOf(external)
        yield* callOnce(token, "deleteMessage", { chat_id: recipient, message_id: messageId })
      })

      const react = Effect.fnUntraced(function*(channel: ChannelContext, recipient: string, external: string, reaction: string | null) {
        const token = yield* tokenOf(channel)
        const messageId = yield* messageIdOf(external)
        yield* callOnce(token, "setMessageReaction", {
          chat_id: recipient,
          message_id: messageId,
          reaction: reaction === null ? [] : [{ type: "emoji", emoji: reaction }]
        })
      })

      const download = Effect.fnUntraced(function*(channel: ChannelContext, fileId: string) {
        const token = yield* tokenOf(channel)
        const file = yield* callOnce(token, "getFile", { file_id: fileId })
        const path = Option.getOrUndefined(decodeFilePath(file))?.file_path
        if (path === undefined) return yield* unavailable("Telegram answered without a file path.")
        const answer = yield* http.execute(HttpClientRequest.get(`${base}/file/bot${token}/${path}`), "Telegram")
        if (answer.status !== 200) {
          return yield* answer.status >= 500 ? unavailable("Telegram could not serve the file.") : rejected("Telegram refused the file download.")
        }
        return { bytes: answer.bytes, mimeType: contentTypeOf(answer, path) }
      })

      const registerWebhook = Effect.fnUntraced(function*(channel: ChannelContext, url: string, secret: string) {
        const token = yield* tokenOf(channel)
        const me = Option.getOrUndefined(decodeMe(yield* callOnce(token, "getMe", {})))
        yield* callOnce(token, "setWebhook", { url, secret_token: secret, allowed_updates: ["message", "edited_message"] })
        return { username: me?.username ?? null }
      })

      const getStickerSet = Effect.fnUntraced(function*(channel: ChannelContext, name: string) {
        const token = yield* tokenOf(channel)
        const result = yield* callOnce(token, "getStickerSet", { name }).pipe(
          Effect.map(Option.some),
          // The Bot API's answer for an unknown (or malformed) set name: 400 STICKERSET_INVALID.
          Effect.catchIf((e) => e.code === "rejected" && e.message.includes("STICKERSET_INVALID"), () => Effect.succeedNone)
        )
        if (Option.isNone(result)) return Option.none()
        const set = decodeStickerSet(result.value)
        if (Option.isNone(set)) return yield* unavailable("Telegram answered without a sticker set.")
        return set
      })

      const bots = () => notSupported("Telegram bots cannot block users.")
      const noTemplates = () => notSupported("Telegram has no message templates.")
      const adapter: RawAdapter = {
        send,
        edit,
        revoke,
        react,
        like: () => Effect.fail(notSupported("Telegram has no likes.")),
        block: () => Effect.fail(bots()),
        unblock: () => Effect.fail(bots()),
        download,
        requestCallPermission: () => Effect.fail(notSupported("Telegram bots cannot place calls.")),
        submitTemplate: () => Effect.fail(noTemplates()),
        templatePage: () => Effect.fail(noTemplates()),
        deleteTemplate: () => Effect.fail(noTemplates())
      }
      return TelegramApi.of({ adapter, registerWebhook, getStickerSet })
    })
  )
}

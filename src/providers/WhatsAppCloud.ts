import { Context, Effect, Layer, Option, Schema } from "effect"
import { HttpClientRequest } from "effect/http"
import { createHmac } from "node:crypto"
import { AppConfig } from "../platform/Config.ts"
import { safeEqual } from "../platform/Crypto.ts"
import { type CallPermissionReply, type ChannelContext, type InboundMessage, type InboundStatus, type OutboundAttachment, type ModerationStatus, type OutboundMessage, ProviderError, ProviderThrottled, type RawAdapter, type ProviderTemplate, type SentMessage, type TemplateRef, type TemplateVerdict } from "./Provider.ts"
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
// Cloud API webhook shapes (only the fields we read; anything else is ignored).

const Media = Schema.Struct({
  id: Schema.String,
  mime_type: Schema.optional(Schema.String),
  caption: Schema.optional(Schema.String),
  filename: Schema.optional(Schema.String),
  voice: Schema.optional(Schema.Boolean)
})
const WaReferral = Schema.Struct({
  source_url: Schema.optional(Schema.String),
  source_id: Schema.optional(Schema.String),
  source_type: Schema.optional(Schema.String),
  body: Schema.optional(Schema.String),
  headline: Schema.optional(Schema.String),
  media_type: Schema.optional(Schema.String),
  image_url: Schema.optional(Schema.String),
  video_url: Schema.optional(Schema.String),
  thumbnail_url: Schema.optional(Schema.String),
  ctwa_clid: Schema.optional(Schema.String)
})
const WaMessage = Schema.Struct({
  from: Schema.String,
  id: Schema.String,
  timestamp: Schema.String,
  type: Schema.String,
  text: Schema.optional(Schema.Struct({ body: Schema.String })),
  image: Schema.optional(Media),
  audio: Schema.optional(Media),
  video: Schema.optional(Media),
  document: Schema.optional(Media),
  sticker: Schema.optional(Media),
  reaction: Schema.optional(Schema.Struct({ message_id: Schema.String, emoji: Schema.optional(Schema.String) })),
  context: Schema.optional(Schema.Struct({ id: Schema.optional(Schema.String) })),
  referral: Schema.optional(WaReferral),
  interactive: Schema.optional(Schema.Struct({
    type: Schema.optional(Schema.String),
    call_permission_reply: Schema.optional(Schema.Struct({
      response: Schema.optional(Schema.String),
      is_permanent: Schema.optional(Schema.Boolean),
      expiration_timestamp: Schema.optional(Schema.Union([Schema.Number, Schema.String])),
      response_source: Schema.optional(Schema.String)
    }))
  }))
})
type WaMessage = typeof WaMessage.Type
const WaStatus = Schema.Struct({
  id: Schema.String,
  status: Schema.String,
  biz_opaque_callback_data: Schema.optional(Schema.String),
  errors: Schema.optional(Schema.Array(Schema.Struct({
    code: Schema.optional(Schema.Number),
    title: Schema.optional(Schema.String),
    message: Schema.optional(Schema.String),
    error_data: Schema.optional(Schema.Struct({ details: Schema.optional(Schema.String) }))
  })))
})
const WaValue = Schema.Struct({
  metadata: Schema.optional(Schema.Struct({ phone_number_id: Schema.optional(Schema.String) })),
  contacts: Schema.optional(Schema.Array(Schema.Struct({
    wa_id: Schema.String,
    profile: Schema.optional(Schema.Struct({ name: Schema.optional(Schema.String) }))
  }))),
  messages: Schema.optional(Schema.Array(WaMessage)),
  statuses: Schema.optional(Schema.Array(WaStatus)),
  // fields `message_template_status_update` and `phone_number_quality_update`
  event: Schema.optional(Schema.String),
  current_limit: Schema.optional(Schema.String),
  max_daily_conversations_per_business: Schema.optional(Schema.Union([Schema.String, Schema.Number])),
  message_template_id: Schema.optional(Schema.Union([Schema.Number, Schema.String])),
  reason: Schema.optional(Schema.NullOr(Schema.String))
})
export const WhatsAppWebhook = Schema.Struct({
  object: Schema.String,
  entry: Schema.Array(Schema.Struct({
    id: Schema.optional(Schema.String),
    changes: Schema.Array(Schema.Struct({ field: Schema.String, value: Schema.optional(WaValue) }))
  }))
})
export type WhatsAppWebhook = typeof WhatsAppWebhook.Type

// ---------------------------------------------------------------------------
// Webhook verification

/** `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body keyed with the app secret>`. */
export const validSignature = (appSecret: string, rawBody: Uint8Array, header: string | undefined): boolean => {
  const match = header === undefined ? null : /^sha256=([0-9a-f]{64})$/i.exec(header.trim())
  if (match === null) return false
  const expected = createHmac("sha256", appSecret).update(rawBody).digest()
  return safeEqual(expected, Buffer.from(match[1], "hex"))
}

// ---------------------------------------------------------------------------
// Inbound normalisation

const mediaKinds = ["image", "audio", "video", "document", "sticker"] as const

const referralOf = (r: typeof WaReferral.Type | undefined): Record<string, unknown> | null => {
  if (r === undefined) return null
  const out: Record<string, unknown> = {}
  const keys = ["source_id", "headline", "image_url", "video_url", "source_url", "body", "ctwa_clid"] as const
  for (const key of keys) if (r[key] !== undefined) out[key] = r[key]
  if (r.source_type === "ad" || r.source_type === "post") out.source_type = r.source_type
  if (r.media_type === "image" || r.media_type === "video") out.media_type = r.media_type
  return out
}

const messageOf = (m: WaMessage, names: ReadonlyMap<string, string>, now: Date): InboundMessage => {
  const kind = mediaKinds.find((k) => m.type === k && m[k] !== undefined)
  const media = kind === undefined ? undefined : m[kind]
  const messageType = m.type === "text" || m.type === "reaction"
    ? m.type
    : kind === "audio" && media?.voice === true
    ? "voice"
    : kind ?? "unsupported_type"
  const emoji = m.reaction?.emoji === undefined || m.reaction.emoji === "" ? null : m.reaction.emoji
  const seconds = Number(m.timestamp)
  return {
    externalMessageId: m.id,
    from: {
      external_id: m.from,
      username: null,
      name: names.get(m.from) ?? null,
      phone: /^\d{5,20}$/.test(m.from) ? `+${m.from}` : null,
      profile_picture: null
    },
    text: m.text?.body ?? media?.caption ?? (m.type === "reaction" ? emoji : null),
    messageType,
    attachments: kind === undefined || media === undefined ? [] : [{
      type: messageType,
      mime_type: media.mime_type ?? null,
      url: null,
      provider_ref: media.id,
      thumbnail_url: null,
      file_name: media.filename ?? null
    }],
    referral: referralOf(m.referral),
    thread: null,
    quotedExternalMessageId: m.reaction?.message_id ?? m.context?.id ?? null,
    timestamp: Number.isFinite(seconds) && seconds > 0 ? new Date(seconds * 1000) : now,
    ...(m.reaction !== undefined ? { reaction: { externalMessageId: m.reaction.message_id, emoji } } : {})
  }
}

/** The user's answer in an `interactive` message of type `call_permission_reply`; null when it has none. */
const callPermissionReplyOf = (m: WaMessage): CallPermissionReply | null => {
  const reply = m.interactive?.call_permission_reply
  if (reply === undefined || (reply.response !== "accept" && reply.response !== "reject")) return null
  const expires = reply.expiration_timestamp === undefined ? Number.NaN : Number(reply.expiration_timestamp)
  return {
    from: m.from,
    response: reply.response,
    permanent: reply.response === "accept" && reply.is_permanent === true,
    expiresAt: Number.isFinite(expires) && expires > 0 ? new Date(expires * 1000) : null,
    requestMessageId: m.context?.id ?? null,
    externalMessageId: m.id,
    source: reply.response_source ?? null
  }
}

const statusValues = new Set(["sent", "delivered", "read", "failed"])

/**
 * What a `phone_number_quality_update` says about the number: its throughput (messages a second)
 * and its messaging limit (unique customers outside the 24-hour window per rolling 24 h; null is
 * unlimited). A key is absent when the notification does not speak of it.
 */
export interface ProviderLimits {
  readonly provider_throughput?: number
  readonly messaging_limit?: number | null
}

const tierLimits: Record<string, number | null> = {
  TIER_50: 50,
  TIER_250: 250,
  TIER_1K: 1_000,
  TIER_2K: 2_000,
  TIER_10K: 10_000,
  TIER_100K: 100_000,
  TIER_UNLIMITED: null
}

/** The throughput of an upgraded number, and of every other (the Cloud API's figures). */
export const upgradedThroughput = 1_000
export const defaultThroughput = 80

export const providerLimitsOf = (value: typeof WaValue.Type): ProviderLimits => {
  const event = value.event?.toUpperCase() ?? ""
  if (event === "THROUGHPUT_UPGRADE") return { provider_throughput: upgradedThroughput }
  if (event === "THROUGHPUT_DOWNGRADE") return { provider_throughput: defaultThroughput }
  const daily = Number(value.max_daily_conversations_per_business)
  if (Number.isInteger(daily) && daily > 0) return { messaging_limit: daily }
  const tier = value.current_limit?.toUpperCase()
  return tier !== undefined && tier in tierLimits ? { messaging_limit: tierLimits[tier] } : {}
}

/**
 * Messages, statuses and call-permission answers of one webhook delivery. A Meta app posts
 * every number's traffic to its one webhook URL, so changes for another phone number id are
 * skipped.
 */
export const normalizeWebhook = (payload: WhatsAppWebhook, phoneNumberId: string, now: Date) => {
  const messages: Array<InboundMessage> = []
  const statuses: Array<InboundStatus> = []
  const callPermissionReplies: Array<CallPermissionReply> = []
  const templateVerdicts: Array<TemplateVerdict> = []
  const limits: Array<ProviderLimits> = []
  for (const entry of payload.entry) {
    for (const change of entry.changes) {
      const value = change.value
      // It names the number only by its display number, which a channel does not store: it counts for the channel whose hook received it.
      if (change.field === "phone_number_quality_update" && value !== undefined) {
        limits.push(providerLimitsOf(value))
        continue
      }
      if (change.field === "message_template_status_update" && value?.event !== undefined && value.message_template_id !== undefined) {
        // FLAGGED is a quality warning, not a moderation state.
        if (value.event.toUpperCase() !== "FLAGGED") {
          templateVerdicts.push({
            externalId: String(value.message_template_id),
            status: moderationStatus(value.event),
            reason: reasonOf(value.reason ?? undefined)
          })
        }
        continue
      }
      if (change.field !== "messages" || value === undefined) continue
      const target = value.metadata?.phone_number_id
      if (target !== undefined && target !== phoneNumberId) continue
      const names = new Map((value.contacts ?? []).flatMap((c) => (c.profile?.name ? [[c.wa_id, c.profile.name] as const] : [])))
      for (const m of value.messages ?? []) {
        // A permission answer is a state change of the contact, not a message of the conversation.
        if (m.interactive?.type === "call_permission_reply") {
          const reply = callPermissionReplyOf(m)
          if (reply !== null) callPermissionReplies.push(reply)
        } else {
          messages.push(messageOf(m, names, now))
        }
      }
      for (const s of value.statuses ?? []) {
        if (!statusValues.has(s.status)) continue
        const e = s.errors?.[0]
        statuses.push({
          externalMessageId: s.id,
          status: s.status as InboundStatus["status"],
          error: e === undefined ? null : e.error_data?.details ?? e.message ?? e.title ?? (e.code !== undefined ? `error ${e.code}` : null),
          reference: s.biz_opaque_callback_data ?? null
        })
      }
    }
  }
  return { messages, statuses, callPermissionReplies, templateVerdicts, limits }
}

// ---------------------------------------------------------------------------
// Outbound

const WaError = Schema.Struct({
  error: Schema.Struct({
    message: Schema.optional(Schema.String),
    code: Schema.optional(Schema.Number),
    error_data: Schema.optional(Schema.Struct({ details: Schema.optional(Schema.String) }))
  })
})
const WaSent = Schema.Struct({ messages: Schema.NonEmptyArray(Schema.Struct({ id: Schema.String })) })
const WaUploaded = Schema.Struct({ id: Schema.String })
const WaMediaInfo = Schema.Struct({ url: Schema.String, mime_type: Schema.optional(Schema.String) })
const WaBlockAnswer = Schema.Struct({
  block_users: Schema.optional(Schema.Struct({
    failed_users: Schema.optional(Schema.Array(Schema.Struct({
      errors: Schema.optional(Schema.Array(Schema.Struct({
        code: Schema.optional(Schema.Number),
        message: Schema.optional(Schema.String),
        error_data: Schema.optional(Schema.Struct({ details: Schema.optional(Schema.String) }))
      })))
    })))
  }))
})

const decodeError = decodeAs(WaError)
const decodeSent = decodeAs(WaSent)
const decodeUploaded = decodeAs(WaUploaded)
const decodeMediaInfo = decodeAs(WaMediaInfo)
const decodeBlock = decodeAs(WaBlockAnswer)

/** Re-engagement required: the user has not written within 24 hours. */
const reEngagement = 131047

/**
 * Throttle answers and how long to hold off (the Cloud API gives no retry time): 130429 the
 * number's throughput, 131056 the pair of this number and one user (about one message per 6 s),
 * 80007 and 4 the account's or app's call rate; HTTP 429 without a code counts as throughput.
 */
export const throttleOf = (code: number | undefined, status: number): { readonly scope: "channel" | "pair"; readonly retryAfterMs: number } | null => {
  switch (code) {
    case 130429:
      return { scope: "channel", retryAfterMs: 1_000 }
    case 131056:
      return { scope: "pair", retryAfterMs: 6_000 }
    case 80007:
    case 4:
      return { scope: "channel", retryAfterMs: 60_000 }
    default:
      return status === 429 ? { scope: "channel", retryAfterMs: 1_000 } : null
  }
}

const errorFor = (code: number | undefined, message: string, status: number): ProviderError | ProviderThrottled => {
  if (code === reEngagement) return new ProviderError({ code: "not_reachable_24h", message })
  const throttle = throttleOf(code, status)
  if (throttle !== null) return new ProviderThrottled({ ...throttle, message })
  if (status >= 500 || code === 131048) return unavailable(message)
  return rejected(message)
}

const failure = (answer: RawAnswer): ProviderError | ProviderThrottled =>
  Option.match(Option.flatMap(parseJson(answer), decodeError), {
    onNone: () => errorFor(undefined, `WhatsApp answered HTTP ${answer.status}.`, answer.status),
    onSome: ({ error }) =>
      errorFor(error.code, error.error_data?.details ?? error.message ?? `WhatsApp answered HTTP ${answer.status}.`, answer.status)
  })

/** A throttle answer outside sending (or after part of a send went out) is one more way of being unavailable. */
const once = <A, R>(effect: Effect.Effect<A, ProviderError | ProviderThrottled, R>): Effect.Effect<A, ProviderError, R> =>
  Effect.catchTag(effect, "ProviderThrottled", (t) => Effect.fail(unavailable(t.message)))

const mediaType = (type: string) => {
  switch (type) {
    case "image":
    case "photo":
      return "image"
    case "voice":
    case "audio":
      return "audio"
    case "video":
      return "video"
    case "sticker":
      return "sticker"
    default:
      return "document"
  }
}
const captionable = new Set(["image", "video", "document"])
const captionLimit = 1024

export const phoneNumberIdPattern = /^\d{1,30}$/

const namedParameter = (v: { readonly name: string; readonly value: string }) => ({ type: "text", parameter_name: v.name, text: v.value })

const WaTemplateCreated = Schema.Struct({ id: Schema.String, status: Schema.optional(Schema.String) })
const WaTemplateList = Schema.Struct({
  data: Schema.Array(Schema.Struct({
    id: Schema.String,
    name: Schema.String,
    language: Schema.String,
    status: Schema.String,
    rejected_reason: Schema.optional(Schema.String)
  })),
  paging: Schema.optional(Schema.Struct({
    cursors: Schema.optional(Schema.Struct({ before: Schema.optional(Schema.String), after: Schema.optional(Schema.String) })),
    next: Schema.optional(Schema.String)
  }))
})
const decodeTemplateCreated = decodeAs(WaTemplateCreated)
const decodeTemplateList = decodeAs(WaTemplateList)

/** Meta's template statuses onto ours; appeals stay pending, anything retired counts as disabled. */
export const moderationStatus = (status: string): ModerationStatus => {
  switch (status.toUpperCase()) {
    case "APPROVED":
    case "REINSTATED":
      return "approved"
    case "REJECTED":
      return "rejected"
    case "PAUSED":
      return "paused"
    case "PENDING":
    case "IN_APPEAL":
      return "pending"
    default:
      return "disabled"
  }
}

/** `NONE` is how Meta says "no reason". */
const reasonOf = (reason: string | undefined) => reason === undefined || reason === "" || reason === "NONE" ? null : reason

const buttonOf = (b: ProviderTemplate["buttons"][number]) =>
  b.type === "url"
    ? { type: "URL", text: b.label, url: b.value ?? "" }
    : b.type === "phone"
    ? { type: "PHONE_NUMBER", text: b.label, phone_number: b.value ?? "" }
    : { type: "QUICK_REPLY", text: b.label }

/** The Graph API `components` of a template with `parameter_format: NAMED`. */
const componentsOf = (t: ProviderTemplate) => [
  ...(t.header === null ? [] : [{
    type: "HEADER",
    format: "TEXT",
    text: t.header.text,
    ...(t.header.examples.length === 0
      ? {}
      : { example: { header_text_named_params: t.header.examples.map((e) => ({ param_name: e.name, example: e.value })) } })
  }]),
  {
    type: "BODY",
    text: t.body.text,
    ...(t.body.examples.length === 0
      ? {}
      : { example: { body_text_named_params: t.body.examples.map((e) => ({ param_name: e.name, example: e.value })) } })
  },
  ...(t.footer === null ? [] : [{ type: "FOOTER", text: t.footer }]),
  ...(t.buttons.length === 0 ? [] : [{ type: "BUTTONS", buttons: t.buttons.map(buttonOf) }])
]

export class WhatsAppCloudApi extends Context.Service<WhatsAppCloudApi, {
  readonly adapter: RawAdapter
}>()("crm/channels/WhatsAppCloudApi") {
  static readonly layer = Layer.effect(
    WhatsAppCloudApi,
    Effect.gen(function*() {
      const http = yield* makeProviderHttp
      const config = yield* AppConfig
      const base = config.whatsappApiBase.replace(/\/+$/, "")

      const accountOf = (channel: ChannelContext) => {
        const { access_token: token, phone_number_id: phone } = channel.credentials
        return token !== undefined && phone !== undefined && phoneNumberIdPattern.test(phone)
          ? Effect.succeed({ token, phone })
          : Effect.fail(rejected("The channel has no valid WhatsApp credentials."))
      }

      const call = (request: HttpClientRequest.HttpClientRequest, token: string) =>
        Effect.flatMap(
          http.execute(HttpClientRequest.bearerToken(request, token), "WhatsApp"),
          (answer): Effect.Effect<unknown, ProviderError | ProviderThrottled> => {
            if (answer.status >= 200 && answer.status < 300) return Effect.succeed(Option.getOrNull(parseJson(answer)))
            return Effect.fail(failure(answer))
          }
        )

      const postMessage = (account: { token: string; phone: string }, body: Record<string, unknown>) =>
        Effect.flatMap(
          call(HttpClientRequest.post(`${base}/${account.phone}/messages`).pipe(HttpClientRequest.bodyJsonUnsafe(body)), account.token),
          (result) =>
            Option.match(decodeSent(result), {
              onNone: () => Effect.fail(unavailable("WhatsApp answered without a message id.")),
              onSome: (sent) => Effect.succeed(sent.messages[0].id)
            })
        )

      const mediaObject = Effect.fnUntraced(function*(account: { token: string; phone: string }, item: OutboundAttachment) {
        if (item.url !== null) return { link: item.url }
        if (item.storage_path === null) return yield* rejected("The attachment has neither a file nor a URL.")
        const bytes = yield* http.readLocal(item.storage_path)
        const mime = item.mime_type ?? "application/octet-stream"
        const form = new FormData()
        form.append("messaging_product", "whatsapp")
        form.append("type", mime)
        form.append("file", new Blob([bytes], { type: mime }), item.file_name ?? "file")
        const uploaded = yield* call(HttpClientRequest.post(`${base}/${account.phone}/media`).pipe(HttpClientRequest.bodyFormData(form)), account.token)
        const id = Option.getOrUndefined(decodeUploaded(uploaded))?.id
        if (id === undefined) return yield* unavailable("WhatsApp answered the upload without a media id.")
        return { id }
      })

      const send = Effect.fnUntraced(function*(channel: ChannelContext, message: OutboundMessage) {
        const account = yield* accountOf(channel)
        const envelope = {
          messaging_product: "whatsapp",
          recipient_type: "individual",
          to: message.recipient,
          ...(message.quotedExternalMessageId !== null ? { context: { message_id: message.quotedExternalMessageId } } : {}),
          ...(message.reference !== undefined ? { biz_opaque_callback_data: message.reference } : {})
        }
        const done = (id: string): SentMessage => ({ externalMessageId: id, externalThreadId: null, status: "sent" })
        if (message.template !== undefined) {
          const t = message.template
          return done(yield* postMessage(account, {
            ...envelope,
            type: "template",
            template: {
              name: t.name,
              language: { code: t.language },
              components: [
                ...(t.header.length === 0 ? [] : [{ type: "header", parameters: t.header.map(namedParameter) }]),
                ...(t.body.length === 0 ? [] : [{ type: "body", parameters: t.body.map(namedParameter) }])
              ]
            }
          }))
        }
        const text = message.text !== null && message.text.trim() !== "" ? message.text : null
        const items = message.attachments
        if (items.length === 0 && text === null) return yield* rejected("There is nothing to send.")
        const captioned = items.length === 1 && captionable.has(mediaType(items[0].type)) &&
          (text === null || text.length <= captionLimit)
        const ids: Array<string> = []
        // Once a part is delivered the send cannot be made again without doubling it: a later throttle is a failure.
        const part = <A>(effect: Effect.Effect<A, ProviderError | ProviderThrottled>) => ids.length === 0 ? effect : once(effect)
        if (text !== null && !captioned) {
          ids.push(yield* postMessage(account, { ...envelope, type: "text", text: { body: text, preview_url: false } }))
        }
        for (const item of items) {
          const type = mediaType(item.type)
          const media = yield* part(mediaObject(account, item))
          ids.push(yield* part(postMessage(account, {
            ...envelope,
            type,
            [type]: {
              ...media,
              ...(captioned && text !== null ? { caption: text } : {}),
              ...(type === "document" && item.file_name !== null ? { filename: item.file_name } : {})
            }
          })))
        }
        return done(ids[0])
      })

      const react = Effect.fnUntraced(function*(channel: ChannelContext, recipient: string, external: string, reaction: string | null) {
        const account = yield* accountOf(channel)
        yield* postMessage(account, {
          messaging_product: "whatsapp",
          recipient_type: "individual",
          to: recipient,
          type: "reaction",
          reaction: { message_id: external, emoji: reaction ?? "" }
        })
      })

      const blockList = (method: "POST" | "DELETE") =>
        Effect.fnUntraced(function*(channel: ChannelContext, user: string) {
          const account = yield* accountOf(channel)
          const url = `${base}/${account.phone}/block_users`
          const request = (method === "POST" ? HttpClientRequest.post(url) : HttpClientRequest.delete(url)).pipe(
            HttpClientRequest.bodyJsonUnsafe({ messaging_product: "whatsapp", block_users: [{ user }] })
          )
          const answer = yield* http.execute(HttpClientRequest.bearerToken(request, account.token), "WhatsApp")
          // Failures are per user and may come with a 2xx or with the 139100 summary error.
          const failed = Option.getOrUndefined(Option.flatMap(parseJson(answer), decodeBlock))?.block_users?.failed_users?.[0]
          if (failed !== undefined) {
            const e = failed.errors?.[0]
            return yield* errorFor(e?.code, e?.error_data?.details ?? e?.message ?? "WhatsApp refused the block list change.", 200)
          }
          if (answer.status < 200 || answer.status >= 300) return yield* failure(answer)
        })

      const download = Effect.fnUntraced(function*(channel: ChannelContext, mediaId: string) {
        const account = yield* accountOf(channel)
        if (!/^[A-Za-z0-9_.-]{1,200}$/.test(mediaId)) return yield* rejected("Not a WhatsApp media id.")
        const info = Option.getOrUndefined(decodeMediaInfo(yield* call(HttpClientRequest.get(`${base}/${mediaId}`), account.token)))
        if (info === undefined) return yield* unavailable("WhatsApp answered without a media URL.")
        const answer = yield* http.execute(HttpClientRequest.bearerToken(HttpClientRequest.get(info.url), account.token), "WhatsApp")
        if (answer.status !== 200) return yield* failure(answer)
        return { bytes: answer.bytes, mimeType: info.mime_type ?? contentTypeOf(answer, null) }
      })

      // Business Calling's free-form request: an interactive message the user answers with
      // accept or reject (the `call_permission_reply` webhook).
      const requestCallPermission = Effect.fnUntraced(function*(channel: ChannelContext, recipient: string, body: string) {
        const account = yield* accountOf(channel)
        const externalMessageId = yield* postMessage(account, {
          messaging_product: "whatsapp",
          recipient_type: "individual",
          to: recipient,
          type: "interactive",
          interactive: {
            type: "call_permission_request",
            action: { name: "call_permission_request" },
            body: { text: body }
          }
        })
        return { externalMessageId }
      })

      /** Templates belong to the WhatsApp Business Account, not to the phone number. */
      const businessOf = (channel: ChannelContext) =>
        Effect.flatMap(accountOf(channel), (account) => {
          const waba = channel.credentials.business_account_id
          return waba !== undefined && phoneNumberIdPattern.test(waba)
            ? Effect.succeed({ token: account.token, waba })
            : Effect.fail(rejected("The channel has no WhatsApp Business Account id (credentials.business_account_id)."))
        })

      const submitTemplate = Effect.fnUntraced(function*(channel: ChannelContext, template: ProviderTemplate, externalId: string | null) {
        const business = yield* businessOf(channel)
        // A known template is edited in place (Meta re-reviews it); a new one is created.
        if (externalId !== null) {
          yield* call(
            HttpClientRequest.post(`${base}/${encodeURIComponent(externalId)}`).pipe(
              HttpClientRequest.bodyJsonUnsafe({ category: template.category.toUpperCase(), components: componentsOf(template) })
            ),
            business.token
          )
          return { externalId, status: "pending" as const, reason: null }
        }
        const created = decodeTemplateCreated(
          yield* call(
            HttpClientRequest.post(`${base}/${business.waba}/message_templates`).pipe(HttpClientRequest.bodyJsonUnsafe({
              name: template.name,
              language: template.language,
              category: template.category.toUpperCase(),
              parameter_format: "NAMED",
              components: componentsOf(template)
            })),
            business.token
          )
        )
        if (Option.isNone(created)) return yield* unavailable("WhatsApp answered without a template id.")
        return { externalId: created.value.id, status: moderationStatus(created.value.status ?? "PENDING"), reason: null }
      })

      // Meta pages an account's templates with cursors: `paging.next` is present only when another page follows.
      const templatePage = Effect.fnUntraced(function*(channel: ChannelContext, page: { readonly limit: number; readonly after: string | null }) {
        const business = yield* businessOf(channel)
        const params: Record<string, string> = { fields: "id,name,language,status,rejected_reason", limit: String(page.limit) }
        if (page.after !== null) params.after = page.after
        const answer = decodeTemplateList(
          yield* call(HttpClientRequest.get(`${base}/${business.waba}/message_templates`).pipe(HttpClientRequest.setUrlParams(params)), business.token)
        )
        if (Option.isNone(answer)) return yield* unavailable("WhatsApp answered without a template list.")
        const { data, paging } = answer.value
        return {
          templates: data.map((t) => ({ externalId: t.id, name: t.name, language: t.language, status: moderationStatus(t.status), reason: reasonOf(t.rejected_reason) })),
          after: paging?.next !== undefined && paging.cursors?.after !== undefined ? paging.cursors.after : null
        }
      })

      const deleteTemplate = Effect.fnUntraced(function*(channel: ChannelContext, ref: TemplateRef) {
        const business = yield* businessOf(channel)
        yield* call(
          HttpClientRequest.delete(`${base}/${business.waba}/message_templates`).pipe(
            HttpClientRequest.setUrlParams({ name: ref.name, hsm_id: ref.externalId })
          ),
          business.token
        )
      })

      const block = blockList("POST")
      const unblock = blockList("DELETE")
      const adapter: RawAdapter = {
        send,
        edit: () => Effect.fail(notSupported("The WhatsApp Cloud API cannot edit sent messages.")),
        revoke: () => Effect.fail(notSupported("The WhatsApp Cloud API cannot delete messages for the recipient.")),
        react: (...args) => once(react(...args)),
        like: () => Effect.fail(notSupported("WhatsApp has no likes.")),
        block: (...args) => once(block(...args)),
        unblock: (...args) => once(unblock(...args)),
        download: (...args) => once(download(...args)),
        requestCallPermission: (...args) => once(requestCallPermission(...args)),
        submitTemplate: (...args) => once(submitTemplate(...args)),
        templatePage: (...args) => once(templatePage(...args)),
        deleteTemplate: (...args) => once(deleteTemplate(...args))
      }
      return WhatsAppCloudApi.of({ adapter })
    })
  )
}

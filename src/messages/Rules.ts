import type { CompanyId } from "../auth/Domain.ts"
import type { Credentials } from "../providers/Credentials.ts"
import { type ChannelType } from "../providers/Domain.ts"
import type { ProviderError } from "../providers/Provider.ts"
import { channelContext } from "../providers/Rules.ts"
import { BadGateway } from "../platform/Errors.ts"
import type { Message } from "./Domain.ts"
import type { ThreadContext } from "./ThreadsRepo.ts"

export const blockedMessage = "This contact is blocked; the message was not sent."

/** Attachment types that are records of something, not files a provider can hand over. */
export const unfetchable = new Set(["template", "ephemeral", "unsupported_type"])

const media = ["text", "image", "video", "audio", "voice", "document", "sticker"]
/** What each channel type can carry as a new outbound message (the social inbox has no voice notes or stickers). */
export const carries: Record<ChannelType, ReadonlySet<string>> = {
  msgr_a: new Set(media),
  msgr_a_business: new Set(media),
  msgr_b: new Set(media),
  msgr_c_business: new Set(["text", "image", "video", "audio", "document"])
}

/** The provider's view of a thread's channel. */
export const contextOf = (credentials: Credentials["Service"], companyId: CompanyId, t: ThreadContext) =>
  channelContext(credentials, companyId, {
    id: t.channel_id,
    type: t.channel_type,
    provider: t.provider,
    status: t.channel_status,
    credentials: t.credentials,
    settings: t.settings
  })

export const recipientOf = (t: ThreadContext) => t.external_thread_id ?? t.account_external_id ?? ""

export const providerFailed = (e: ProviderError) =>
  new BadGateway({ message: `The messaging provider refused the request (${e.code}): ${e.message}` })

/** `message.type` repeats the canonical `message_type` (spec: Events). */
export const messagePayload = (message: Message) => ({ ...message, type: message.message_type })

export const createdPayload = (message: Message) => ({
  message: messagePayload(message),
  conversation_id: message.conversation_id,
  thread_id: message.thread_id,
  channel_id: message.channel_id,
  type: message.message_type,
  referral: message.referral
})

export type Change = "status" | "edited" | "deleted" | "revoked" | "attachments"

export const updatedPayload = (message: Message, change: Change) => ({
  message: messagePayload(message),
  conversation_id: message.conversation_id,
  thread_id: message.thread_id,
  channel_id: message.channel_id,
  type: message.message_type,
  change
})

export const defaultStopWords = ["stop", "unsubscribe", "стоп", "отписаться"]

export const isStopWord = (words: ReadonlySet<string>, text: string | null) =>
  text !== null && words.has(text.trim().toLowerCase())

const referralFields: Record<string, ReadonlyArray<string>> = {
  msgr_a: ["source_type", "source_id", "headline", "image_url", "video_url", "source_url", "body", "ctwa_clid", "media_type"],
  msgr_a_business: ["source_type", "source_id", "headline", "image_url", "video_url", "source_url", "body", "ctwa_clid", "media_type"],
  msgr_c_business: ["source_type", "source_id", "headline", "image_url", "video_url", "post_id", "ref"]
}

/** The ad attribution object with only the fields the spec lists for the channel; null where referrals do not exist. */
export const referralFor = (type: ChannelType, referral: Record<string, unknown> | null): Record<string, unknown> | null => {
  const fields = referralFields[type]
  if (fields === undefined || referral === null) return null
  const out: Record<string, unknown> = {}
  for (const field of fields) {
    const value = referral[field]
    if (typeof value === "string" || value === null) out[field] = value
  }
  return Object.keys(out).length === 0 ? null : out
}

/** Order of delivery states: a late `delivered` never overwrites `read`; `failed` always wins. */
const rank: Record<string, number> = { pending: 0, sent: 1, delivered: 2, read: 3 }
export const advances = (current: string | null, next: string) =>
  next === "failed" || current === null || (rank[next] ?? 0) >= (rank[current] ?? 0)

/**
 * What a send hands its provider as an opaque reference (WhatsApp `biz_opaque_callback_data`), echoed in
 * status webhooks: how a status finds a message whose send was cut off before its provider id was recorded.
 */
export const messageReference = (messageId: number) => `crm_message:${messageId}`
export const referencedMessage = (reference: string | null | undefined): number | null => {
  const match = reference == null ? null : /^crm_message:(\d{1,15})$/.exec(reference)
  return match === null ? null : Number(match[1])
}

import { Context, type Effect, Schema } from "effect"
import type { ChannelType, ProviderKind } from "./Domain.ts"

/** The channel as an adapter sees it: decrypted credentials, never exposed over the API. */
export interface ChannelContext {
  readonly id: number
  readonly companyId: number
  readonly type: ChannelType
  readonly provider: ProviderKind
  readonly status: "connected" | "disconnected"
  readonly credentials: Record<string, string>
  readonly settings: Record<string, unknown>
}

export interface OutboundAttachment {
  readonly type: string
  readonly mime_type: string | null
  /** Local file to upload, or a URL the provider can fetch. */
  readonly storage_path: string | null
  readonly url: string | null
  readonly file_name: string | null
}

export interface OutboundMessage {
  /** The provider's chat/recipient id (thread.external_thread_id, else the contact account's external_id). */
  readonly recipient: string
  readonly text: string | null
  readonly attachments: ReadonlyArray<OutboundAttachment>
  readonly quotedExternalMessageId: string | null
  /** An approved template instead of free-form content (`text` is then the rendered copy we keep). */
  readonly template?: OutboundTemplate
  /** Ours, opaque to the provider: where it echoes it in status notifications, passed on (`InboundStatus.reference`). */
  readonly reference?: string
}

export interface NamedValue {
  readonly name: string
  readonly value: string
}

/** A template send: named variables of the header and of the body. */
export interface OutboundTemplate {
  readonly name: string
  readonly language: string
  readonly header: ReadonlyArray<NamedValue>
  readonly body: ReadonlyArray<NamedValue>
}

/** Provider moderation states of a template instance (`local` is ours: never submitted). */
export type ModerationStatus = "pending" | "approved" | "rejected" | "paused" | "disabled"

/** A template instance as submitted for review: variables are named, each with an example. */
export interface ProviderTemplate {
  /** Lowercase letters, digits and underscores (the group's slug). */
  readonly name: string
  readonly language: string
  readonly category: string
  readonly header: { readonly text: string; readonly examples: ReadonlyArray<NamedValue> } | null
  readonly body: { readonly text: string; readonly examples: ReadonlyArray<NamedValue> }
  readonly footer: string | null
  readonly buttons: ReadonlyArray<{ readonly type: "quick_reply" | "url" | "phone"; readonly label: string; readonly value: string | null }>
}

export interface TemplateRef {
  readonly externalId: string
  readonly name: string
  readonly language: string
  /** What we hold now. */
  readonly status: ModerationStatus
}

/** One template of a business account, as its provider lists it. */
export interface ListedTemplate {
  readonly externalId: string
  readonly name: string
  readonly language: string
  readonly status: ModerationStatus
  readonly reason: string | null
}

/** A page of an account's templates; `after` is the cursor of the next page, null on the last. */
export interface TemplatePage {
  readonly templates: ReadonlyArray<ListedTemplate>
  readonly after: string | null
}

export interface TemplateVerdict {
  readonly externalId: string
  readonly status: ModerationStatus
  readonly reason: string | null
}

export interface SentMessage {
  readonly externalMessageId: string
  readonly externalThreadId: string | null
  readonly status: "sent" | "delivered" | "read" | "failed"
}

export class ProviderError extends Schema.TaggedError<ProviderError>()("ProviderError", {
  /** `channel_offline`, `not_reachable_24h`, `not_supported`, `rejected`, `unavailable`… */
  code: Schema.String,
  message: Schema.String
}) {}

/**
 * The provider answered that a limit of its own is exceeded and did not take the request: the
 * same request may be made again after `retryAfterMs`. `scope` is what the limit counts: the
 * whole channel (number or bot), one chat, or the pair of the channel and one recipient.
 */
export class ProviderThrottled extends Schema.TaggedError<ProviderThrottled>()("ProviderThrottled", {
  scope: Schema.Literals(["channel", "chat", "pair"]),
  retryAfterMs: Schema.Int,
  message: Schema.String
}) {}

/** One messenger integration. Each method gets the channel it acts for. */
export interface ProviderAdapter {
  send(channel: ChannelContext, message: OutboundMessage): Effect.Effect<SentMessage, ProviderError>
  edit(channel: ChannelContext, recipient: string, externalMessageId: string, text: string): Effect.Effect<void, ProviderError>
  revoke(channel: ChannelContext, recipient: string, externalMessageId: string): Effect.Effect<void, ProviderError>
  /** `null` removes the reaction. */
  react(channel: ChannelContext, recipient: string, externalMessageId: string, reaction: string | null): Effect.Effect<void, ProviderError>
  like(channel: ChannelContext, externalThreadId: string, externalMessageId: string): Effect.Effect<void, ProviderError>
  block(channel: ChannelContext, externalUserId: string): Effect.Effect<void, ProviderError>
  unblock(channel: ChannelContext, externalUserId: string): Effect.Effect<void, ProviderError>
  /** Bytes of an inbound media item (attachment fetch). */
  download(channel: ChannelContext, providerMediaRef: string): Effect.Effect<{ readonly bytes: Uint8Array; readonly mimeType: string | null }, ProviderError>
  /**
   * Asks the user for permission to call them (`body` explains why); the answer comes back
   * later as a `CallPermissionReply`. Types without `channelRules.callPermission` refuse it.
   */
  requestCallPermission(channel: ChannelContext, recipient: string, body: string): Effect.Effect<{ readonly externalMessageId: string }, ProviderError>
  /** Sends a template instance to the provider's review; a resubmission of a known one passes its `externalId`. */
  submitTemplate(channel: ChannelContext, template: ProviderTemplate, externalId: string | null): Effect.Effect<TemplateVerdict, ProviderError>
  /**
   * One page of the templates of the channel's business account with the provider's current verdicts
   * (sync): at most `limit`, from the cursor `after` (null: the first page).
   */
  templatePage(channel: ChannelContext, page: { readonly limit: number; readonly after: string | null }): Effect.Effect<TemplatePage, ProviderError>
  /** Removes the instance from the provider (a later sync cannot bring it back). */
  deleteTemplate(channel: ChannelContext, ref: TemplateRef): Effect.Effect<void, ProviderError>
}

/**
 * An adapter as it talks to its provider: its `send` tells a throttle answer apart, which
 * `providers/Pacing.ts` turns into a back-off and a later retry. Its other calls count a
 * throttle answer as `unavailable`.
 */
export interface RawAdapter extends Omit<ProviderAdapter, "send"> {
  send(channel: ChannelContext, message: OutboundMessage): Effect.Effect<SentMessage, ProviderError | ProviderThrottled>
}

/** Picks the adapter for a channel's `provider`. */
export class Providers extends Context.Service<Providers, {
  forChannel(channel: ChannelContext): ProviderAdapter
}>()("crm/channels/Providers") {}

/** An inbound message as every adapter hands it to ingestion (`src/messages/Inbound.ts`). */
export interface InboundMessage {
  readonly externalMessageId: string | null
  readonly from: {
    readonly external_id: string
    readonly username?: string | null
    readonly name?: string | null
    readonly phone?: string | null
    readonly profile_picture?: string | null
  }
  readonly text: string | null
  readonly messageType: string
  readonly attachments: ReadonlyArray<{
    readonly type: string
    readonly mime_type: string | null
    /** Provider runtime URL or media reference (fetch pulls the bytes later). */
    readonly url: string | null
    readonly provider_ref: string | null
    readonly thumbnail_url: string | null
    readonly file_name: string | null
  }>
  readonly referral: Record<string, unknown> | null
  /** Group / comment thread on the provider side; absent for one-to-one chats. */
  readonly thread: { readonly external_id: string; readonly is_group: boolean } | null
  readonly quotedExternalMessageId: string | null
  readonly timestamp: Date
  /** The provider reports a new text for the earlier message with this `externalMessageId` (Telegram `edited_message`). */
  readonly edited?: boolean
  /** A reaction of the sender to one of our messages (`messageType: "reaction"`); `emoji: null` removes it. */
  readonly reaction?: { readonly externalMessageId: string; readonly emoji: string | null }
}

export interface InboundStatus {
  readonly externalMessageId: string
  readonly status: "sent" | "delivered" | "read" | "failed"
  readonly error: string | null
  /** The `OutboundMessage.reference` of the send, where the provider echoes it. */
  readonly reference?: string | null
}

/** The user's answer to a call-permission request (or one given unasked, e.g. from the business profile). */
export interface CallPermissionReply {
  /** The user's provider id (a contact account's external_id). */
  readonly from: string
  readonly response: "accept" | "reject"
  /** An acceptance without an end; otherwise it lasts until `expiresAt`. */
  readonly permanent: boolean
  readonly expiresAt: Date | null
  /** The provider's id of the request message being answered, when the provider says. */
  readonly requestMessageId: string | null
  /** The provider's id of the answer itself (redeliveries carry the same one). */
  readonly externalMessageId: string | null
  /** `user_action`, or `automatic` (granted by calling the business). */
  readonly source: string | null
}

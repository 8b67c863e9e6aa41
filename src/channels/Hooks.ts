import { Context, Data, DateTime, Effect, Layer, Option, Schema } from "effect"
import type { CurrentActor } from "../auth/Domain.ts"
import { type CallPermissionRecorded, ContactEligibility } from "../contacts/Eligibility.ts"
import { Inbound } from "../messages/Inbound.ts"
import { randomToken, safeEqualString } from "../platform/Crypto.ts"
import {
  Forbidden,
  invalidField,
  type NotFound,
  ruleViolation,
  Unauthenticated,
  Unprocessable
} from "../platform/Errors.ts"
import { channelNotFound, Channels } from "./Channels.ts"
import type { SandboxCallPermission, SandboxInbound, SandboxStatus } from "./Domain.ts"
import { type ChannelContext, type InboundMessage } from "../providers/Provider.ts"
import { channelRules } from "../providers/Domain.ts"
import { normalizeUpdate, TelegramUpdate } from "../providers/Telegram.ts"
import { normalizeWebhook, validSignature, WhatsAppWebhook } from "../providers/WhatsAppCloud.ts"
import { Moderation } from "../templates/Moderation.ts"

/** A verified request whose body is not JSON at all (400). */
export class MalformedBody extends Data.TaggedError("MalformedBody")<{ readonly message: string }> {}

const badSignature = (what: string) => new Unauthenticated({ message: `Invalid webhook ${what}.` })
const referralChannels = new Set(["msgr_a", "msgr_a_business", "msgr_c_business"])

const parseJson = (body: Uint8Array) =>
  Effect.try({
    try: () => JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body)) as unknown,
    catch: () => new MalformedBody({ message: "The request body must be valid JSON." })
  })

const decodeTelegram = Schema.decodeUnknownEffect(TelegramUpdate)
const decodeWhatsApp = Schema.decodeUnknownEffect(WhatsAppWebhook)
const unreadable = (what: string) => () =>
  Effect.fail(new Unprocessable({ message: `The request body is not a ${what}.`, errors: { body: [`The request body is not a ${what}.`] } }))

type Received = { readonly message_id: number; readonly conversation_id: number; readonly duplicate: boolean }

/** Inbound traffic: provider webhooks (verified before anything is stored) and the sandbox's simulated traffic. */
export class Hooks extends Context.Service<Hooks, {
  telegram(channelId: number, secretToken: string | undefined, body: Uint8Array): Effect.Effect<void, Unauthenticated | NotFound | Unprocessable | MalformedBody>
  whatsappVerify(channelId: number, mode: string | undefined, token: string | undefined, challenge: string | undefined): Effect.Effect<string, Forbidden | NotFound>
  whatsapp(channelId: number, signature: string | undefined, body: Uint8Array): Effect.Effect<void, Unauthenticated | NotFound | Unprocessable | MalformedBody>
  sandboxInbound(channelId: number, input: SandboxInbound): Effect.Effect<Received, Forbidden | NotFound | Unprocessable, CurrentActor>
  sandboxStatus(channelId: number, input: SandboxStatus): Effect.Effect<void, Forbidden | NotFound | Unprocessable, CurrentActor>
  sandboxCallPermission(channelId: number, input: SandboxCallPermission): Effect.Effect<CallPermissionRecorded, Forbidden | NotFound | Unprocessable, CurrentActor>
}>()("crm/channels/Hooks") {
  static readonly layer = Layer.effect(
    Hooks,
    Effect.gen(function*() {
      const channels = yield* Channels
      const inbound = yield* Inbound
      const eligibility = yield* ContactEligibility
      const moderation = yield* Moderation

      const hookChannel = (channelId: number, provider: "telegram" | "whatsapp_cloud") =>
        Effect.flatMap(channels.forHook(channelId, provider), (found) =>
          Option.match(found, { onNone: () => Effect.fail(channelNotFound()), onSome: Effect.succeed }))

      const telegram = Effect.fn("Hooks.telegram")(function*(channelId: number, secretToken: string | undefined, body: Uint8Array) {
        const { channel, webhookSecret } = yield* hookChannel(channelId, "telegram")
        if (secretToken === undefined || !safeEqualString(secretToken, webhookSecret)) return yield* badSignature("secret token")
        const update = yield* Effect.flatMap(parseJson(body), (json) => decodeTelegram(json).pipe(Effect.catch(unreadable("Telegram update"))))
        const message = normalizeUpdate(update)
        if (Option.isSome(message)) yield* inbound.receive(channel, message.value)
      })

      const whatsappVerify = Effect.fn("Hooks.whatsappVerify")(function*(
        channelId: number,
        mode: string | undefined,
        token: string | undefined,
        challenge: string | undefined
      ) {
        const { channel } = yield* hookChannel(channelId, "whatsapp_cloud")
        const expected = channel.credentials.verify_token
        if (mode !== "subscribe" || token === undefined || challenge === undefined || expected === undefined || !safeEqualString(token, expected)) {
          return yield* new Forbidden({ message: "Webhook verification failed." })
        }
        return challenge
      })

      const whatsapp = Effect.fn("Hooks.whatsapp")(function*(channelId: number, signature: string | undefined, body: Uint8Array) {
        const { channel } = yield* hookChannel(channelId, "whatsapp_cloud")
        const appSecret = channel.credentials.app_secret
        if (appSecret === undefined || !validSignature(appSecret, body, signature)) return yield* badSignature("signature")
        const payload = yield* Effect.flatMap(parseJson(body), (json) => decodeWhatsApp(json).pipe(Effect.catch(unreadable("WhatsApp notification"))))
        if (payload.object !== "whatsapp_business_account") return
        const now = new Date(DateTime.toEpochMillis(yield* DateTime.now))
        const { messages, statuses, callPermissionReplies, templateVerdicts, limits } = normalizeWebhook(payload, channel.credentials.phone_number_id ?? "", now)
        for (const announced of limits) yield* channels.recordProviderLimits(channel, announced)
        for (const message of messages) yield* inbound.receive(channel, message)
        for (const status of statuses) yield* inbound.status(channel, status)
        for (const reply of callPermissionReplies) yield* eligibility.recordReply(channel, reply)
        for (const verdict of templateVerdicts) yield* moderation.providerVerdict(channel, verdict)
      })

      const sandboxChannel = Effect.fnUntraced(function*(channelId: number) {
        const channel: ChannelContext = yield* channels.visibleContext(channelId, "conversation.create")
        if (channel.provider !== "sandbox") {
          return yield* ruleViolation("channel_not_sandbox", "Only sandbox channels accept simulated traffic.")
        }
        return channel
      })

      const sandboxInbound = Effect.fn("Hooks.sandboxInbound")(function*(channelId: number, input: SandboxInbound) {
        const channel = yield* sandboxChannel(channelId)
        const referral = input.referral ?? null
        if (referral !== null && !referralChannels.has(channel.type)) {
          return yield* invalidField("referral", "Referrals exist only on msgr_a, msgr_a_business and msgr_c_business channels.")
        }
        const message: InboundMessage = {
          externalMessageId: input.external_message_id ?? `sbx_in_${randomToken(24)}`,
          from: {
            external_id: input.from.external_id,
            username: input.from.username ?? null,
            name: input.from.name ?? null,
            phone: input.from.phone ?? null,
            profile_picture: null
          },
          text: input.text ?? null,
          messageType: "text",
          attachments: [],
          referral,
          thread: input.thread == null ? null : { external_id: input.thread.external_id, is_group: input.thread.is_group ?? false },
          quotedExternalMessageId: null,
          timestamp: new Date(DateTime.toEpochMillis(yield* DateTime.now))
        }
        const received = yield* inbound.receive(channel, message)
        return { message_id: received.messageId, conversation_id: received.conversationId, duplicate: received.duplicate }
      })

      const sandboxStatus = Effect.fn("Hooks.sandboxStatus")(function*(channelId: number, input: SandboxStatus) {
        const channel = yield* sandboxChannel(channelId)
        yield* inbound.status(channel, { externalMessageId: input.external_message_id, status: input.status, error: input.error ?? null })
      })

      const sandboxCallPermission = Effect.fn("Hooks.sandboxCallPermission")(function*(channelId: number, input: SandboxCallPermission) {
        const channel = yield* sandboxChannel(channelId)
        if (!channelRules[channel.type].callPermission) {
          return yield* ruleViolation("call_permission_not_required", `A ${channel.type} channel does not take call-permission requests.`)
        }
        const recorded = yield* eligibility.recordReply(channel, {
          from: input.from.external_id,
          response: input.response,
          permanent: input.response === "accept" && input.permanent === true,
          expiresAt: null,
          requestMessageId: input.request_message_id ?? null,
          externalMessageId: `sbx_in_${randomToken(24)}`,
          source: "user_action"
        })
        if (Option.isNone(recorded)) {
          return yield* invalidField("from.external_id", `No contact has the ${channel.type} account ${input.from.external_id}.`)
        }
        return recorded.value
      })

      return Hooks.of({ telegram, whatsappVerify, whatsapp, sandboxInbound, sandboxStatus, sandboxCallPermission })
    })
  )
}

import { Clock, Config, Effect } from "effect"
import { type Owner, RateLimiter, type Rule } from "../platform/RateLimiter.ts"
import type { Decision } from "../platform/SlidingWindow.ts"
import { type ChannelContext, type OutboundMessage, type ProviderAdapter, ProviderError, type ProviderThrottled, type RawAdapter } from "./Provider.ts"

/** What every channel of a provider may send unless its settings say otherwise. */
export interface PacingDefaults {
  readonly sandboxPerSecond: number
  readonly whatsappPerSecond: number
  readonly telegramPerSecond: number
  /** Telegram, one chat: one message a second on average, this many at once. */
  readonly telegramChatBurst: number
  readonly telegramGroupPerMinute: number
  /** Added to every one-second window: a send counted when it leaves may reach the provider a little later. */
  readonly marginMs: number
  /** How long a send may be held back by throttle answers before it fails as `throttled`. */
  readonly throttleMaxWaitMs: number
}

/** The limits one send of a channel keeps to: the channel's throughput, and where the provider has one, the chat's. */
export interface SendLimits {
  readonly channel: Rule
  readonly chat: { readonly bucket: string; readonly rule: Rule } | null
}

const positive = (value: unknown): number | null => {
  const n = Number(value)
  return Number.isInteger(n) && n > 0 ? n : null
}

/**
 * Messages a second for the whole channel: the channel's `sends_per_second` setting, else the
 * throughput the provider announced for the number (`provider_throughput`, written by the
 * WhatsApp quality webhook), else the provider's default.
 */
export const perSecondOf = (channel: ChannelContext, defaults: PacingDefaults): number =>
  positive(channel.settings.sends_per_second) ??
    (channel.provider === "whatsapp_cloud"
      ? positive(channel.settings.provider_throughput) ?? defaults.whatsappPerSecond
      : channel.provider === "telegram"
      ? defaults.telegramPerSecond
      : defaults.sandboxPerSecond)

/** A Bot API chat id below zero is a group, a supergroup or a channel post chat. */
const isGroupChat = (recipient: string) => recipient.startsWith("-")

export const limitsOf = (channel: ChannelContext, recipient: string, defaults: PacingDefaults): SendLimits => {
  const channelRule = { limit: perSecondOf(channel, defaults), windowSeconds: 1, windowMs: 1000 + defaults.marginMs }
  if (channel.provider !== "telegram") return { channel: channelRule, chat: null }
  const burst = Math.max(1, defaults.telegramChatBurst)
  const chat = isGroupChat(recipient)
    ? { bucket: `channel:${channel.id}:group:${recipient}`, rule: { limit: defaults.telegramGroupPerMinute, windowSeconds: 60 } }
    : { bucket: `channel:${channel.id}:chat:${recipient}`, rule: { limit: burst, windowSeconds: burst } }
  return { channel: channelRule, chat }
}

export const channelBucket = (channelId: number) => `channel:${channelId}`

export const pacingDefaults = Config.all({
  sandboxPerSecond: Config.Int("SANDBOX_SENDS_PER_SECOND").pipe(Config.withDefault(1000)),
  whatsappPerSecond: Config.Int("WHATSAPP_SENDS_PER_SECOND").pipe(Config.withDefault(80)),
  telegramPerSecond: Config.Int("TELEGRAM_SENDS_PER_SECOND").pipe(Config.withDefault(30)),
  telegramChatBurst: Config.Int("TELEGRAM_CHAT_BURST").pipe(Config.withDefault(3)),
  telegramGroupPerMinute: Config.Int("TELEGRAM_GROUP_PER_MINUTE").pipe(Config.withDefault(20)),
  marginMs: Config.Int("PACING_MARGIN_MS").pipe(Config.withDefault(25)),
  throttleMaxWaitMs: Config.Int("PROVIDER_THROTTLE_MAX_WAIT_MS").pipe(Config.withDefault(600_000))
})

/**
 * Sends held to each channel's budget for the whole cluster. The budget belongs to the channel's
 * company entity and is spent through leased slices (`RateLimiter.spendLeased`), so N runners
 * together keep to it; a unit is taken immediately before the provider call, never ahead of a wait, and
 * counts until the provider answers.
 * A throttle answer pauses the channel's budget on every runner for the time the provider gives
 * and the send is made again; a pair throttle (one recipient) holds back only that recipient, on
 * this runner.
 */
export const makePacing = Effect.gen(function*() {
  const defaults = yield* pacingDefaults
  const limiter = yield* RateLimiter
  const pairsUntil = new Map<string, number>()

  const waitFor = (consume: Effect.Effect<Decision>): Effect.Effect<void> =>
    Effect.flatMap(consume, (decision) =>
      decision.allowed ? Effect.void : Effect.andThen(Effect.sleep(decision.retryAfterMs), waitFor(consume)))

  const pairKey = (channel: ChannelContext, recipient: string) => `${channel.id}|${recipient}`

  const waitForPair = (key: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const until = pairsUntil.get(key) ?? 0
      if (until <= now) {
        pairsUntil.delete(key)
        return Effect.void
      }
      return Effect.sleep(until - now)
    })

  const backOff = (channel: ChannelContext, recipient: string, throttle: ProviderThrottled, owner: Owner, limits: SendLimits) =>
    Effect.gen(function*() {
      yield* Effect.logInfo("provider throttled a send; backing off", { channel_id: channel.id, scope: throttle.scope, retry_after_ms: throttle.retryAfterMs })
      if (throttle.scope === "pair") {
        const now = yield* Clock.currentTimeMillis
        if (pairsUntil.size > 100_000) pairsUntil.clear()
        pairsUntil.set(pairKey(channel, recipient), now + throttle.retryAfterMs)
      } else if (throttle.scope === "chat" && limits.chat !== null) {
        yield* limiter.pause(owner, limits.chat.bucket, throttle.retryAfterMs)
      } else {
        yield* limiter.pause(owner, channelBucket(channel.id), throttle.retryAfterMs)
      }
    })

  const pacedSend = (raw: RawAdapter) => (channel: ChannelContext, message: OutboundMessage) =>
    Effect.gen(function*() {
      const owner: Owner = { companyId: channel.companyId }
      const limits = limitsOf(channel, message.recipient, defaults)
      const giveUpAt = (yield* Clock.currentTimeMillis) + defaults.throttleMaxWaitMs
      while (true) {
        yield* waitForPair(pairKey(channel, message.recipient))
        const chat = limits.chat
        if (chat !== null) yield* waitFor(limiter.consume(owner, chat.bucket, chat.rule))
        const outcome = yield* limiter.spendLeased(owner, channelBucket(channel.id), limits.channel, Effect.result(raw.send(channel, message)))
        if (outcome._tag === "Success") return outcome.success
        const error = outcome.failure
        if (error._tag === "ProviderError") return yield* error
        if ((yield* Clock.currentTimeMillis) + error.retryAfterMs > giveUpAt) {
          return yield* new ProviderError({ code: "throttled", message: error.message })
        }
        yield* backOff(channel, message.recipient, error, owner, limits)
      }
    })

  /** The adapter with its `send` paced; its other calls are rare and go straight through. */
  return (raw: RawAdapter): ProviderAdapter => ({ ...raw, send: pacedSend(raw) })
}).pipe(Effect.orDie)

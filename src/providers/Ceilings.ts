import { Clock, Config, Effect } from "effect"
import type { ChannelContext, ProviderAdapter } from "./Provider.ts"

/** Sends per second a provider accepts per sending number or bot, whoever calls the adapter. */
export const providerCeilings = { whatsapp_cloud: 80, telegram: 30 } as const

/**
 * The ceiling of one channel: a sliding one-second log of reserved send slots. A reservation is
 * taken synchronously (so concurrent sends of a channel each get their own slot), then the send
 * waits for its slot. Per process: runners sharing a channel each keep to it.
 */
export const makeCeilings = Effect.gen(function*() {
  const sandboxPerSecond = yield* Config.Int("SANDBOX_SENDS_PER_SECOND").pipe(Config.withDefault(1000))
  const logs = new Map<number, Array<number>>()

  const perSecondOf = (channel: ChannelContext) => {
    if (channel.provider === "sandbox") {
      const own = Number(channel.settings.sends_per_second)
      return Number.isFinite(own) && own > 0 ? own : sandboxPerSecond
    }
    return providerCeilings[channel.provider]
  }

  const reserve = (channelId: number, limit: number, now: number) => {
    let log = logs.get(channelId)
    if (log === undefined) {
      if (logs.size >= 10_000) logs.clear()
      log = []
      logs.set(channelId, log)
    }
    while (log.length > 0 && log[0] <= now - 1000) log.shift()
    const at = log.length >= limit ? Math.max(now, log[log.length - limit] + 1000) : now
    log.push(at)
    return at
  }

  /** The adapter with its `send` held to the channel's ceiling. */
  return (adapter: ProviderAdapter): ProviderAdapter => ({
    ...adapter,
    send: (channel, message) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const at = reserve(channel.id, perSecondOf(channel), now)
        return at > now ? Effect.andThen(Effect.sleep(at - now), adapter.send(channel, message)) : adapter.send(channel, message)
      })
  })
}).pipe(Effect.orDie)

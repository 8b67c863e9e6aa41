import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { TestRunner } from "effect/cluster"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { CompanyLayer } from "../../cluster/CompanyHandlers.ts"
import { RateLimiterLayer } from "../../cluster/RateLimiterLayer.ts"
import { AppConfig } from "../../src/platform/Config.ts"
import { RateLimiter } from "../../src/platform/RateLimiter.ts"
import { limitsOf, makePacing, type PacingDefaults, perSecondOf } from "../../src/providers/Pacing.ts"
import { type ChannelContext, ProviderThrottled, type RawAdapter } from "../../src/providers/Provider.ts"
import { providerLimitsOf } from "../../src/providers/WhatsAppCloud.ts"
import { type RunningServer, startServer } from "../support/TestServer.ts"
import { busiest } from "../support/Windows.ts"

// Two runners' pacing (each its own rate limiter, with its own slices) against one company entity that owns
// the channel's budget, as two processes share it; a fake provider notes when each send arrives.

const defaults: PacingDefaults = {
  sandboxPerSecond: 1000,
  whatsappPerSecond: 80,
  telegramPerSecond: 30,
  telegramChatBurst: 3,
  telegramGroupPerMinute: 20,
  marginMs: 25,
  throttleMaxWaitMs: 600_000
}

const channel = (over: Partial<ChannelContext> = {}): ChannelContext => ({
  id: 7,
  companyId: 3,
  type: "msgr_a_business",
  provider: "sandbox",
  status: "connected",
  credentials: {},
  settings: {},
  ...over
})

interface Arrival {
  readonly at: number
  readonly text: string
}

/**
 * A provider that accepts everything, except while `refuseUntil` lies ahead (a 130429 answer, nothing taken).
 * `transitMs(i)`: how long the i-th request is on its way before it arrives (a busy sender, a slow network).
 */
const fakeProvider = (transitMs: (i: number) => number = () => 0) => {
  const arrivals: Array<Arrival> = []
  const refused: Array<Arrival> = []
  let refuseUntil = 0
  let sent = 0
  const send: RawAdapter["send"] = (_channel, message) =>
    Effect.andThen(Effect.sleep(transitMs(sent++)), () => {
      const arrival = { at: performance.now(), text: message.text ?? "" }
      if (arrival.at < refuseUntil) {
        refused.push(arrival)
        return Effect.fail(new ProviderThrottled({ scope: "channel", retryAfterMs: 300, message: "(#130429) Rate limit hit" }))
      }
      arrivals.push(arrival)
      return Effect.succeed({ externalMessageId: `m${arrivals.length}`, externalThreadId: null, status: "sent" as const })
    })
  const adapter = { send } as Pick<RawAdapter, "send">
  return { arrivals, refused, adapter, refuseFor: (ms: number) => (refuseUntil = performance.now() + ms) }
}


let server: RunningServer
beforeAll(async () => {
  server = await startServer()
}, 120_000)
afterAll(() => server?.close())

/** One runner: its own rate limiter (its own slices) over the shared company entity. */
const runnerPacing = Effect.gen(function*() {
  const limiter = yield* Layer.build(RateLimiterLayer.pipe(Layer.provide(AppConfig.layerWith({}))))
  return yield* makePacing.pipe(Effect.provideContext(limiter))
})

/** The company entity over the app's own database, under an in-memory sharding. */
const cluster = Effect.flatMap(
  Effect.promise(() => server.runInApp(SqlClient.SqlClient)),
  (sql) => Layer.build(CompanyLayer.pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, sql)), Layer.provideMerge(TestRunner.layer)))
)

/** `total` sends on one channel, alternating between two runners, all at once; the provider sees them arrive. */
const sendFromTwoRunners = (
  settings: Record<string, unknown>,
  total: number,
  meanwhile: (provider: ReturnType<typeof fakeProvider>) => Effect.Effect<void>,
  transitMs?: (i: number) => number
) =>
  Effect.flatMap(cluster, (context) =>
    Effect.gen(function*() {
      const provider = fakeProvider(transitMs)
      const [a, b] = yield* Effect.all([runnerPacing, runnerPacing]).pipe(Effect.provideContext(context))
      const sender = [a(provider.adapter as RawAdapter), b(provider.adapter as RawAdapter)]
      const paced = channel({ settings })
      const sends = Effect.forEach(Array.from({ length: total }, (_, i) => i), (i) =>
        sender[i % 2].send(paced, { recipient: `r${i}`, text: `t${i}`, attachments: [], quotedExternalMessageId: null }), { concurrency: "unbounded", discard: true })
      yield* Effect.all([sends, meanwhile(provider)], { concurrency: 2 })
      return provider
    }))

describe("channel pacing", () => {
  it("reads the channel's throughput from its settings, the provider's tier, then the provider's default", () => {
    assert.strictEqual(perSecondOf(channel({ provider: "whatsapp_cloud" }), defaults), 80)
    assert.strictEqual(perSecondOf(channel({ provider: "whatsapp_cloud", settings: { provider_throughput: 1000 } }), defaults), 1000)
    assert.strictEqual(perSecondOf(channel({ provider: "whatsapp_cloud", settings: { sends_per_second: 20, provider_throughput: 1000 } }), defaults), 20)
    assert.strictEqual(perSecondOf(channel({ provider: "telegram", type: "msgr_b" }), defaults), 30)
    assert.strictEqual(perSecondOf(channel({ settings: { sends_per_second: "x" } }), defaults), 1000)
    const bot = channel({ provider: "telegram", type: "msgr_b" })
    assert.deepStrictEqual(limitsOf(bot, "42", defaults).chat?.rule, { limit: 3, windowSeconds: 3 })
    assert.deepStrictEqual(limitsOf(bot, "-1001", defaults).chat?.rule, { limit: 20, windowSeconds: 60 })
    assert.strictEqual(limitsOf(channel({ provider: "whatsapp_cloud" }), "15550001", defaults).chat, null)
    assert.strictEqual(limitsOf(bot, "42", defaults).channel.windowMs, 1025)
  })

  it.live("two runners sending on one channel together never exceed its budget in any second, and use most of it", () =>
    Effect.gen(function*() {
      const limit = 40
      const total = 240
      const provider = yield* sendFromTwoRunners({ sends_per_second: limit }, total, () => Effect.void)
      const times = provider.arrivals.map((x) => x.at)
      assert.strictEqual(times.length, total)
      assert.isAtMost(busiest(times, 1000), limit)
      // After the first second's burst the rest arrive at (nearly) the full rate.
      const span = (Math.max(...times) - Math.min(...times)) / 1000
      const rate = (total - limit) / span
      console.log(`two-runner pacing: busiest 1 s window ${busiest(times, 1000)} of ${limit}; ${rate.toFixed(1)}/s after the first second (${(100 * rate / limit).toFixed(1)}%)`)
      // Loose here: timers on a shared machine run late.
      assert.isAtLeast(rate / limit, 0.7, `${rate.toFixed(1)}/s of ${limit}/s`)
    }).pipe(Effect.scoped), 60_000)

  it.live("requests slow on their way to the provider still arrive within the budget: a unit counts until its answer", () =>
    Effect.gen(function*() {
      const limit = 40
      const total = 200
      // The first second's requests spend 300 ms on their way (a busy moment), the later ones arrive at
      // once: counted only from when they left, the first second's would land beside the next second's.
      const provider = yield* sendFromTwoRunners({ sends_per_second: limit }, total, () => Effect.void, (i) => i < limit ? 300 : 0)
      const times = provider.arrivals.map((x) => x.at)
      assert.strictEqual(times.length, total)
      assert.isAtMost(busiest(times, 1000), limit)
    }).pipe(Effect.scoped), 60_000)

  it.live("a throttle answer pauses the channel on both runners; every refused send is made again once and none is lost", () =>
    Effect.gen(function*() {
      const total = 150
      const provider = yield* sendFromTwoRunners({ sends_per_second: 50 }, total, (fake) =>
        Effect.andThen(Effect.sleep("700 millis"), Effect.sync(() => fake.refuseFor(1_500))))
      const texts = provider.arrivals.map((x) => x.text)
      assert.strictEqual(new Set(texts).size, total, "every send accepted once")
      assert.strictEqual(texts.length, total, "none accepted twice")
      assert.isAbove(provider.refused.length, 0)
      // Each runner that met a refusal paused the channel everywhere: the refusals stay few, not one per queued send.
      assert.isAtMost(provider.refused.length, 40, `${provider.refused.length} refused`)
      assert.isAtMost(busiest(provider.arrivals.map((x) => x.at), 1000), 50)
      console.log(`throttle: ${provider.refused.length} refused during the pause, ${texts.length} accepted once each`)
    }).pipe(Effect.scoped), 60_000)
})

describe("the WhatsApp quality notification", () => {
  it("reads the throughput level and the messaging limit it announces", () => {
    assert.deepStrictEqual(providerLimitsOf({ event: "THROUGHPUT_UPGRADE", current_limit: "TIER_UNLIMITED" }), { provider_throughput: 1000 })
    assert.deepStrictEqual(providerLimitsOf({ event: "THROUGHPUT_DOWNGRADE" }), { provider_throughput: 80 })
    assert.deepStrictEqual(providerLimitsOf({ event: "UPGRADE", current_limit: "TIER_10K" }), { messaging_limit: 10_000 })
    assert.deepStrictEqual(providerLimitsOf({ event: "UPGRADE", current_limit: "TIER_1K", max_daily_conversations_per_business: "2000" }), { messaging_limit: 2000 })
    assert.deepStrictEqual(providerLimitsOf({ event: "UPGRADE", current_limit: "TIER_UNLIMITED" }), { messaging_limit: null })
    assert.deepStrictEqual(providerLimitsOf({ event: "FLAGGED" }), {})
  })
})

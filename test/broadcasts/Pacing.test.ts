import { assert, describe, it } from "@effect/vitest"
import { admit, newPacer, nextSlot, paceOf, recordSend, windowMs } from "../../src/broadcasts/Pacing.ts"
import { busiest } from "../support/Windows.ts"

/** Runs a pacer over `durationMs` of simulated time with a random timer lag per wake-up; returns the send times. */
const simulate = (perMinute: number, durationMs: number, maxLagMs: number, seed = 7) => {
  let state = seed
  const random = () => ((state = (state * 1103515245 + 12345) % 2147483648) / 2147483648)
  const pace = paceOf({ enabled: true, messagesPerMinute: perMinute })
  const pacer = newPacer([], 0)
  const sends: Array<number> = []
  let now = 0
  while (now < durationMs) {
    const slot = nextSlot(pace, pacer, now)
    if (slot > now) {
      now = slot + Math.floor(random() * maxLagMs)
      continue
    }
    sends.push(now)
    recordSend(pace, pacer, now, random())
  }
  return sends
}


describe("Pacing", () => {
  it("never puts more than messagesPerMinute into any 60 s window, and uses at least 98% of it, despite timer lag", () => {
    for (const [rate, lag] of [[600, 0], [600, 40], [80, 900], [60, 1500]]) {
      const sends = simulate(rate, 180_000, lag)
      assert.isAtMost(busiest(sends, windowMs), rate, `rate ${rate}, lag ${lag}`)
      const allowance = rate * 3
      assert.isAtLeast(sends.length / allowance, 0.98, `rate ${rate}, lag ${lag}: ${sends.length} of ${allowance}`)
    }
  })

  it("keeps the limit across a restart: the log of the last minute is reloaded", () => {
    const pace = paceOf({ enabled: true, messagesPerMinute: 10 })
    const before = Array.from({ length: 10 }, (_, i) => 50_000 + i * 1000)
    const pacer = newPacer(before, 60_000)
    assert.strictEqual(nextSlot(pace, pacer, 60_000), 110_000)
  })

  it("adds a uniform jitter between sends within its bounds", () => {
    const pace = paceOf({ enabled: true, jitterMinSeconds: 2, jitterMaxSeconds: 5 })
    const pacer = newPacer([], 0)
    let now = 0
    for (const r of [0, 0.5, 0.999]) {
      recordSend(pace, pacer, now, r)
      const next = nextSlot(pace, pacer, now)
      assert.strictEqual(next - now, 2000 + r * 3000)
      now = next
    }
  })

  it("admits actual sends so that no 60 s window holds more than the limit, however late they start", () => {
    // Planned every 100 ms (600/min); the first half of each minute starts up to 900 ms late, then catches up.
    const log: Array<number> = []
    const times: Array<number> = []
    for (let i = 0; i < 3_000; i++) {
      const planned = i * 100
      const lag = (planned % windowMs) < windowMs / 2 ? 900 - (i % 10) * 90 : 0
      times.push(admit(log, 600, planned + lag))
    }
    for (let to = 1; to < times.length; to++) assert.isTrue(times[to] >= times[to - 1])
    assert.strictEqual(busiest(times, windowMs), 600)
    // Still at the rate: 3,000 sends take about five minutes.
    assert.isAtMost(times[times.length - 1], 3_000 * 100 + 1_000)
  })
})

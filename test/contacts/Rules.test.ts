import { assert, describe, it } from "@effect/vitest"
import { decideLogged } from "../../cluster/RateLimitHandlers.ts"
import { blockRules } from "../../src/contacts/Blocking.ts"
import { toE164 } from "../../src/contacts/Domain.ts"
import { callState } from "../../src/contacts/Eligibility.ts"

const hour = 3_600_000
const now = 10 * 24 * hour

describe("block throttle decision", () => {
  it("counts the subject for the per-contact rule and everyone for the company rules", () => {
    const sixOfOne = Array.from({ length: 6 }, (_, i) => ({ subject: "1", at: now - hour + 1000 * (i + 1) }))
    const refused = decideLogged(sixOfOne, "1", blockRules, now)
    assert.deepStrictEqual([refused.allowed, refused.retryAfterMs], [false, 1000])
    const other = decideLogged(sixOfOne, "2", blockRules, now)
    assert.deepStrictEqual([other.allowed, other.remaining], [true, 5])
    // Hits older than the hour no longer count for the hourly rules.
    assert.isTrue(decideLogged(sixOfOne, "1", blockRules, now + hour).allowed)
  })

  it("refuses at 60 an hour and 300 a day per company, waiting for the slowest full rule", () => {
    const hourly = Array.from({ length: 60 }, (_, i) => ({ subject: String(i), at: now - 30 * 60_000 }))
    const byHour = decideLogged(hourly, "new", blockRules, now)
    assert.deepStrictEqual([byHour.allowed, byHour.retryAfterMs], [false, 30 * 60_000])
    const daily = Array.from({ length: 300 }, (_, i) => ({ subject: String(i), at: now - 20 * hour }))
    const byDay = decideLogged(daily, "new", blockRules, now)
    assert.deepStrictEqual([byDay.allowed, byDay.retryAfterMs], [false, 4 * hour])
    assert.deepStrictEqual(decideLogged(daily.slice(1), "new", blockRules, now), { allowed: true, remaining: 0, retryAfterMs: 0 })
  })
})

describe("call-permission state", () => {
  const at = (hoursAgo: number) => new Date(now - hoursAgo * hour)
  it("is none without requests, pending after one, with the daily cooldown and the weekly cap", () => {
    assert.deepStrictEqual(callState([], now), { status: "none", expiresAt: null, attemptsRemaining: 2, cooldownUntil: null })
    const one = callState([{ status: "pending", requested_at: at(2), expires_at: null }], now)
    assert.deepStrictEqual(one, { status: "pending", expiresAt: now - 2 * hour + 7 * 24 * hour, attemptsRemaining: 1, cooldownUntil: now + 22 * hour })
    const two = callState([
      { status: "pending", requested_at: at(30), expires_at: null },
      { status: "rejected", requested_at: at(100), expires_at: null }
    ], now)
    assert.deepStrictEqual([two.status, two.attemptsRemaining, two.cooldownUntil], ["pending", 0, now - 100 * hour + 7 * 24 * hour])
    const old = callState([{ status: "granted", requested_at: at(200), expires_at: new Date(now - hour) }], now)
    assert.deepStrictEqual(old, { status: "none", expiresAt: null, attemptsRemaining: 2, cooldownUntil: null })
  })
})

describe("E.164", () => {
  it("normalizes the usual spellings and refuses what is not a number", () => {
    assert.strictEqual(toE164("+1 (415) 555-0123"), "+14155550123")
    assert.strictEqual(toE164("0044 7700 900123"), "+447700900123")
    assert.strictEqual(toE164("79161234567"), "+79161234567")
    for (const bad of ["12", "+0123456789", "phone", "+1234567890123456", ""]) assert.strictEqual(toE164(bad), undefined, bad)
  })
})

import { assert, describe, it } from "@effect/vitest"
import { decideLogged } from "../../cluster/CompanyHandlers.ts"
import { blockRules } from "../../src/contacts/Blocking.ts"
import { callState } from "../../src/contacts/Eligibility.ts"
import type { PermissionRequestRow } from "../../src/contacts/EligibilityRepo.ts"
import { normalizePhone } from "../../src/platform/Phones.ts"

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
  let id = 0
  const row = (fields: Partial<PermissionRequestRow> & Pick<PermissionRequestRow, "status" | "requested_at">): PermissionRequestRow => ({
    id: ++id,
    origin: "request",
    permanent: false,
    answered_at: null,
    expires_at: null,
    ...fields
  })

  it("is none without requests, pending after one, with the daily cooldown and the weekly cap", () => {
    assert.deepStrictEqual(callState([], now), { status: "none", expiresAt: null, attemptsRemaining: 2, cooldownUntil: null })
    const one = callState([row({ status: "pending", requested_at: at(2) })], now)
    assert.deepStrictEqual(one, { status: "pending", expiresAt: now - 2 * hour + 7 * 24 * hour, attemptsRemaining: 1, cooldownUntil: now + 22 * hour })
    // A request still with the provider already counts, and reads as pending.
    assert.deepStrictEqual(callState([row({ status: "sending", requested_at: at(2) })], now), one)
    const two = callState([
      row({ status: "pending", requested_at: at(30) }),
      row({ status: "rejected", requested_at: at(100), answered_at: at(99) })
    ], now)
    assert.deepStrictEqual([two.status, two.attemptsRemaining, two.cooldownUntil], ["pending", 0, now - 100 * hour + 7 * 24 * hour])
    const old = callState([row({ status: "granted", requested_at: at(200), answered_at: at(199), expires_at: new Date(now - hour) })], now)
    assert.deepStrictEqual(old, { status: "none", expiresAt: null, attemptsRemaining: 2, cooldownUntil: null })
  })

  it("follows the newest event: an answer after the request, an unasked answer that does not count as an attempt", () => {
    const granted = callState([row({ status: "granted", requested_at: at(30), answered_at: at(29), expires_at: new Date(now + 5 * 24 * hour) })], now)
    assert.deepStrictEqual(granted, { status: "granted", expiresAt: now + 5 * 24 * hour, attemptsRemaining: 1, cooldownUntil: null })
    // A grant outlives the week of its request: the answer's own expiry decides.
    const late = callState([row({ status: "granted", requested_at: at(8 * 24), answered_at: at(6 * 24), expires_at: new Date(now + 24 * hour) })], now)
    assert.deepStrictEqual([late.status, late.expiresAt, late.attemptsRemaining], ["granted", now + 24 * hour, 2])
    const permanent = callState([row({ status: "granted", origin: "reply", permanent: true, requested_at: at(400), answered_at: at(400) })], now)
    assert.deepStrictEqual(permanent, { status: "granted", expiresAt: null, attemptsRemaining: 2, cooldownUntil: null })
    // The contact withdrew (an unasked reject) after granting: the newest answer wins, for 7 days.
    const withdrawn = callState([
      row({ status: "rejected", origin: "reply", requested_at: at(1), answered_at: at(1) }),
      row({ status: "granted", requested_at: at(40), answered_at: at(39), expires_at: new Date(now + 24 * hour) })
    ], now)
    assert.deepStrictEqual(withdrawn, { status: "rejected", expiresAt: now - hour + 7 * 24 * hour, attemptsRemaining: 1, cooldownUntil: null })
    const forgotten = callState([row({ status: "rejected", requested_at: at(200), answered_at: at(190) })], now)
    assert.strictEqual(forgotten.status, "none")
  })
})

describe("phone numbers (libphonenumber)", () => {
  it("normalizes the usual international spellings and refuses what is not a number", () => {
    assert.strictEqual(normalizePhone("+1 (415) 555-0123", null), "+14155550123")
    assert.strictEqual(normalizePhone("0044 7911 123456", null), "+447911123456")
    assert.strictEqual(normalizePhone("79161234567", null), "+79161234567")
    for (const bad of ["12", "+0123456789", "phone", "+1234567890123456", "", "+1 000 000 0000", "+4155550123"]) {
      assert.strictEqual(normalizePhone(bad, null), undefined, bad)
    }
  })

  it("reads a national number in the default country, and only there", () => {
    assert.strictEqual(normalizePhone("(415) 555-0123", "US"), "+14155550123")
    assert.strictEqual(normalizePhone("(415) 555-0123", null), undefined)
    assert.strictEqual(normalizePhone("8 701 123 4567", "KZ"), "+77011234567")
    assert.strictEqual(normalizePhone("030 1234567", "DE"), "+49301234567")
    // An international spelling wins over the default country.
    assert.strictEqual(normalizePhone("+44 7911 123456", "US"), "+447911123456")
    assert.strictEqual(normalizePhone("000 000 0000", "US"), undefined)
  })
})

import { assert, describe, it } from "@effect/vitest"
import { decideDelivery, inQuietHours, localMinutes, type Notification, shouldDeliver } from "../../src/notifications/Delivery.ts"
import { mergePreferences, readStored, resolvePreferences } from "../../src/notifications/Domain.ts"

const night = { enabled: true, start: "22:00", end: "07:00" }
const at = (iso: string) => new Date(iso)
const push = (now: string, userTimezone: string, extra: Partial<Notification> = {}): Notification => ({
  kind: "push",
  trigger: "chat_message_new",
  userTimezone,
  now: at(now),
  ...extra
})

describe("localMinutes", () => {
  it("reads the wall clock of the zone, not of UTC", () => {
    assert.strictEqual(localMinutes(at("2026-01-15T17:30:00Z"), "UTC"), 17 * 60 + 30)
    assert.strictEqual(localMinutes(at("2026-01-15T17:30:00Z"), "Asia/Almaty"), 22 * 60 + 30)
    assert.strictEqual(localMinutes(at("2026-01-15T03:05:00Z"), "America/New_York"), 22 * 60 + 5)
    assert.strictEqual(localMinutes(at("2026-01-15T00:00:00Z"), "Asia/Almaty"), 5 * 60)
  })

  it("reads an unknown zone as UTC instead of throwing", () => {
    assert.strictEqual(localMinutes(at("2026-01-15T17:30:00Z"), "Mars/Olympus"), 17 * 60 + 30)
    assert.strictEqual(localMinutes(at("2026-01-15T17:30:00Z"), ""), 17 * 60 + 30)
  })
})

describe("quiet hours across midnight in Asia/Almaty (UTC+5)", () => {
  const prefs = { quiet_hours: night }
  const cases: ReadonlyArray<readonly [utc: string, local: string, suppressed: boolean]> = [
    ["2026-01-15T16:59:00Z", "21:59", false],
    ["2026-01-15T17:00:00Z", "22:00", true],
    ["2026-01-15T17:30:00Z", "22:30", true],
    ["2026-01-15T18:59:00Z", "23:59", true],
    ["2026-01-15T19:00:00Z", "00:00", true],
    ["2026-01-15T23:00:00Z", "04:00", true],
    ["2026-01-16T01:59:00Z", "06:59", true],
    ["2026-01-16T02:00:00Z", "07:00", false],
    ["2026-01-16T07:00:00Z", "12:00", false]
  ]
  for (const [utc, local, suppressed] of cases) {
    it(`${utc} is ${local} in Almaty: ${suppressed ? "suppressed" : "delivered"}`, () => {
      assert.strictEqual(shouldDeliver(prefs, push(utc, "Asia/Almaty")), !suppressed)
      if (suppressed) assert.strictEqual(decideDelivery(prefs, push(utc, "Asia/Almaty")).reason, "quiet_hours")
    })
  }

  it("uses the user's zone: 17:30 UTC is outside the window for a UTC user, inside for Almaty", () => {
    assert.isTrue(shouldDeliver(prefs, push("2026-01-15T17:30:00Z", "UTC")))
    assert.isFalse(shouldDeliver(prefs, push("2026-01-15T17:30:00Z", "Asia/Almaty")))
  })
})

describe("quiet hours in America/New_York around DST", () => {
  const prefs = { quiet_hours: night }
  it("spring forward (2026-03-08 07:00 UTC): 11:30 UTC is 07:30 EDT, no longer quiet", () => {
    // With a fixed EST offset this would read 06:30 and be suppressed.
    assert.isTrue(shouldDeliver(prefs, push("2026-03-08T11:30:00Z", "America/New_York")))
    assert.isFalse(shouldDeliver(prefs, push("2026-03-07T11:30:00Z", "America/New_York")))
    assert.isFalse(shouldDeliver(prefs, push("2026-03-08T06:30:00Z", "America/New_York")))
    assert.isFalse(shouldDeliver(prefs, push("2026-03-08T07:30:00Z", "America/New_York")))
  })

  it("fall back (2026-11-01 06:00 UTC): the repeated 01:30 is quiet both times; 11:30 UTC is 06:30 EST, still quiet", () => {
    assert.isFalse(shouldDeliver(prefs, push("2026-11-01T05:30:00Z", "America/New_York")))
    assert.isFalse(shouldDeliver(prefs, push("2026-11-01T06:30:00Z", "America/New_York")))
    // With the summer offset this would read 07:30 and be delivered.
    assert.isFalse(shouldDeliver(prefs, push("2026-11-01T11:30:00Z", "America/New_York")))
    assert.isTrue(shouldDeliver(prefs, push("2026-11-01T12:00:00Z", "America/New_York")))
    assert.isTrue(shouldDeliver(prefs, push("2026-10-31T11:30:00Z", "America/New_York")))
  })

  it("a window that starts at 22:00 local starts at 02:00 UTC in summer and 03:00 UTC in winter", () => {
    assert.isFalse(shouldDeliver(prefs, push("2026-07-01T02:00:00Z", "America/New_York")))
    assert.isTrue(shouldDeliver(prefs, push("2026-01-15T02:00:00Z", "America/New_York")))
    assert.isFalse(shouldDeliver(prefs, push("2026-01-15T03:00:00Z", "America/New_York")))
  })
})

describe("quiet hours window shapes", () => {
  it("a same-day window [start, end) does not wrap", () => {
    const quiet = { enabled: true, start: "09:00", end: "17:00" }
    assert.isFalse(inQuietHours(quiet, "UTC", at("2026-01-15T08:59:00Z")))
    assert.isTrue(inQuietHours(quiet, "UTC", at("2026-01-15T09:00:00Z")))
    assert.isTrue(inQuietHours(quiet, "UTC", at("2026-01-15T16:59:00Z")))
    assert.isFalse(inQuietHours(quiet, "UTC", at("2026-01-15T17:00:00Z")))
    assert.isFalse(inQuietHours(quiet, "UTC", at("2026-01-15T23:00:00Z")))
  })

  it("is inactive when disabled, when a bound is missing, or when start equals end", () => {
    const now = at("2026-01-15T23:00:00Z")
    assert.isFalse(inQuietHours({ ...night, enabled: false }, "UTC", now))
    assert.isFalse(inQuietHours({ enabled: true, start: null, end: "07:00" }, "UTC", now))
    assert.isFalse(inQuietHours({ enabled: true, start: "22:00", end: null }, "UTC", now))
    assert.isFalse(inQuietHours({ enabled: true, start: "23:00", end: "23:00" }, "UTC", now))
    assert.isFalse(inQuietHours({ enabled: true, start: "25:00", end: "07:00" }, "UTC", now))
    assert.isFalse(inQuietHours(undefined, "UTC", now))
    assert.isTrue(inQuietHours(night, "UTC", now))
  })
})

describe("call_incoming", () => {
  it("is always delivered: during quiet hours, with its trigger, the push channel and everything else off", () => {
    const prefs = {
      channels: { push: false, mail: false, msgr_a: false },
      push_triggers: { call_incoming: false },
      quiet_hours: night
    }
    const decision = decideDelivery(prefs, push("2026-01-15T17:30:00Z", "Asia/Almaty", { trigger: "call_incoming" }))
    assert.deepStrictEqual(decision, { deliver: true, reason: "call_incoming" })
  })

  it("while other pushes in the same minute are suppressed", () => {
    const prefs = { quiet_hours: night }
    for (const trigger of ["chat_message_new", "conversation_assigned", "call_missed"] as const) {
      assert.isFalse(shouldDeliver(prefs, push("2026-01-15T17:30:00Z", "Asia/Almaty", { trigger })), trigger)
    }
  })
})

describe("channels", () => {
  const now = "2026-01-15T12:00:00Z"
  it("a missing channel key counts as on", () => {
    assert.isTrue(shouldDeliver({}, push(now, "UTC")))
    assert.isTrue(shouldDeliver({ channels: {} }, { kind: "mail", category: "onboarding", userTimezone: "UTC", now: at(now) }))
    assert.isTrue(shouldDeliver({ channels: { push: false } }, { kind: "msgr_a", category: "billing", userTimezone: "UTC", now: at(now) }))
  })

  it("channels.msgr_a=false stops billing copies on the messenger, not billing mail", () => {
    const prefs = { channels: { msgr_a: false } }
    const billing = (kind: "mail" | "msgr_a") => ({ kind, category: "billing" as const, userTimezone: "UTC", now: at(now) })
    assert.deepStrictEqual(decideDelivery(prefs, billing("msgr_a")), { deliver: false, reason: "channel_disabled" })
    assert.isTrue(shouldDeliver(prefs, billing("mail")))
    assert.isTrue(shouldDeliver({ channels: { msgr_a: true } }, billing("msgr_a")))
  })

  it("a stored billing switch cannot stop billing: the channel switch is the only way", () => {
    const prefs = { categories: { billing: { enabled: false } } }
    assert.isTrue(shouldDeliver(prefs, { kind: "msgr_a", category: "billing", userTimezone: "UTC", now: at(now) }))
  })

  it("push off silences ordinary pushes", () => {
    assert.deepStrictEqual(decideDelivery({ channels: { push: false } }, push(now, "UTC")), {
      deliver: false,
      reason: "channel_disabled"
    })
  })
})

describe("categories and triggers", () => {
  const now = at("2026-01-15T12:00:00Z")
  it("transactional is always delivered, on any channel, whatever the switches", () => {
    const prefs = {
      channels: { mail: false, push: false, msgr_a: false },
      categories: { transactional: { enabled: false } },
      quiet_hours: { enabled: true, start: "00:00", end: "23:59" }
    }
    for (const kind of ["mail", "push", "msgr_a"] as const) {
      assert.deepStrictEqual(decideDelivery(prefs, { kind, category: "transactional", userTimezone: "UTC", now }), {
        deliver: true,
        reason: "transactional"
      })
    }
  })

  it("a disabled controllable category is not delivered", () => {
    const prefs = { categories: { onboarding: { enabled: false } } }
    assert.deepStrictEqual(decideDelivery(prefs, { kind: "mail", category: "onboarding", userTimezone: "UTC", now }), {
      deliver: false,
      reason: "category_disabled"
    })
    assert.isTrue(shouldDeliver(prefs, { kind: "mail", category: "trial", userTimezone: "UTC", now }))
  })

  it("push triggers: stored values win, missing ones take the defaults (company_unassigned off)", () => {
    const base = { kind: "push" as const, userTimezone: "UTC", now }
    assert.isFalse(shouldDeliver({}, { ...base, trigger: "company_unassigned" }))
    assert.isTrue(shouldDeliver({ push_triggers: { company_unassigned: true } }, { ...base, trigger: "company_unassigned" }))
    assert.deepStrictEqual(decideDelivery({ push_triggers: { call_missed: false } }, { ...base, trigger: "call_missed" }), {
      deliver: false,
      reason: "trigger_disabled"
    })
    assert.isTrue(shouldDeliver({}, { ...base, trigger: "conversation_assigned" }))
  })

  it("quiet hours do not hold back mail or messenger copies", () => {
    const prefs = { quiet_hours: night }
    const when = at("2026-01-15T23:30:00Z")
    assert.isTrue(shouldDeliver(prefs, { kind: "mail", category: "engagement", userTimezone: "UTC", now: when }))
    assert.isTrue(shouldDeliver(prefs, { kind: "msgr_a", category: "billing", userTimezone: "UTC", now: when }))
    assert.isFalse(shouldDeliver(prefs, { kind: "push", category: "engagement", userTimezone: "UTC", now: when }))
  })
})

describe("the snapshot and the merge", () => {
  it("defaults: everything on except company_unassigned, quiet hours off, fixed categories not controllable", () => {
    const snapshot = resolvePreferences({})
    assert.deepStrictEqual(snapshot.channels, { mail: true, push: true, msgr_a: true })
    assert.deepStrictEqual(snapshot.push_triggers, {
      chat_message_new: true,
      conversation_assigned: true,
      call_missed: true,
      call_incoming: true,
      company_unassigned: false
    })
    assert.deepStrictEqual(snapshot.quiet_hours, { enabled: false, start: null, end: null })
    assert.deepStrictEqual(snapshot.categories.transactional, { enabled: true, label: "Transactional", controllable: false })
    assert.strictEqual(snapshot.categories.onboarding.controllable, true)
    assert.isTrue(shouldDeliver(snapshot, push("2026-01-15T23:30:00Z", "UTC")))
  })

  it("merges partially and keeps untouched keys; an unreadable stored document reads as defaults", () => {
    const first = mergePreferences({}, { channels: { msgr_a: false }, quiet_hours: { enabled: true, start: "22:00", end: "07:00" } })
    const second = mergePreferences(first, { channels: { mail: false }, quiet_hours: { end: "06:00" } })
    assert.deepStrictEqual(second.channels, { msgr_a: false, mail: false })
    assert.deepStrictEqual(second.quiet_hours, { enabled: true, start: "22:00", end: "06:00" })
    const third = mergePreferences(second, { categories: { transactional: { enabled: false }, win_back: { enabled: false } } })
    assert.deepStrictEqual(third.categories, { win_back: false })
    assert.deepStrictEqual(readStored({ channels: { mail: "yes" } }), {})
    assert.deepStrictEqual(readStored(null), {})
  })
})

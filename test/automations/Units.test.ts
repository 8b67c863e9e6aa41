import { assert, describe, it } from "@effect/vitest"
import { compileVerdict, eventText } from "../../src/automations/Conditions.ts"
import { wakeAt } from "../../src/automations/Executor.ts"
import { unsafeRegex } from "../../src/automations/Graph.ts"
import { redact } from "../../src/automations/Pii.ts"

const quickVerdict = (conditions: Parameters<typeof compileVerdict>[0], joiner: "and" | "or", text: string | null, messageType: string | null) =>
  compileVerdict(conditions, joiner)(eventText(text, messageType))

describe("automation rules", () => {
  it("wakes after a duration, or at the next HH:MM in a timezone", () => {
    const noon = Date.parse("2026-03-10T12:00:00Z")
    assert.strictEqual(wakeAt({ duration: 90, unit: "seconds" }, noon, "UTC"), noon + 90_000)
    assert.strictEqual(wakeAt({ duration: 2, unit: "days" }, noon, "UTC"), noon + 2 * 86_400_000)
    assert.strictEqual(new Date(wakeAt({ until: "13:30" }, noon, "UTC")).toISOString(), "2026-03-10T13:30:00.000Z")
    assert.strictEqual(new Date(wakeAt({ until: "09:00" }, noon, "UTC")).toISOString(), "2026-03-11T09:00:00.000Z")
    // 12:00 UTC is 17:00 in Almaty (UTC+5): 09:00 there is 04:00 UTC the next day.
    assert.strictEqual(new Date(wakeAt({ until: "09:00" }, noon, "Asia/Almaty")).toISOString(), "2026-03-11T04:00:00.000Z")
    assert.strictEqual(new Date(wakeAt({ until: "12:00" }, noon, "UTC")).toISOString(), "2026-03-11T12:00:00.000Z")
    assert.strictEqual(new Date(wakeAt({ until: "13:00" }, noon, "Not/AZone")).toISOString(), "2026-03-10T13:00:00.000Z")
  })

  it("decides text conditions without reading the database, and leaves fact conditions open", () => {
    const contains = { type: "text_contains", value: "Order" } as const
    const tag = { type: "has_tag", value: 3 } as const
    assert.strictEqual(quickVerdict([contains], "and", "my order", "text"), true)
    assert.strictEqual(quickVerdict([contains], "and", "hello", "text"), false)
    assert.strictEqual(quickVerdict([contains, tag], "and", "hello", "text"), false)
    assert.strictEqual(quickVerdict([contains, tag], "and", "order", "text"), undefined)
    assert.strictEqual(quickVerdict([contains, tag], "or", "order", "text"), true)
    assert.strictEqual(quickVerdict([contains, tag], "or", "hello", "text"), undefined)
    assert.strictEqual(quickVerdict([], "and", null, null), true)
    assert.strictEqual(quickVerdict([{ type: "text_matches", value: "^#\\d+$" }], "and", "#12", "text"), true)
    assert.strictEqual(quickVerdict([{ type: "message_type", value: "voice" }], "and", null, "text"), false)
  })

  it("refuses regexes that can backtrack without end", () => {
    assert.isNull(unsafeRegex("^order #\\d{3,6}$"))
    assert.isNotNull(unsafeRegex("(a+)+$"))
    assert.isNotNull(unsafeRegex("(x*)*"))
    assert.isNotNull(unsafeRegex("(\\w+\\s?){2,}"))
    assert.isNotNull(unsafeRegex("(a)\\1"))
    assert.isNotNull(unsafeRegex("(?=a)"))
    assert.isNotNull(unsafeRegex("["))
    assert.isNotNull(unsafeRegex("a".repeat(201)))
  })

  it("masks phones and e-mails wherever they are, and leaves dates and ids", () => {
    const masked = redact({
      id: 123456,
      phone: "+7 701 234 56 78",
      phones: [{ value: "+77012345678" }],
      email: "ann@example.com",
      text: "call +1 (555) 123-4567 or 5551234567, write bo.b@mail.example.org, order 42 on 2026-11-25T10:00:00Z"
    }) as any
    assert.deepStrictEqual(masked.phone, "***78")
    assert.deepStrictEqual(masked.phones, [{ value: "***78" }])
    assert.strictEqual(masked.email, "a***@example.com")
    assert.strictEqual(masked.id, 123456)
    assert.strictEqual(masked.text, "call ***67 or ***67, write b***@mail.example.org, order 42 on 2026-11-25T10:00:00Z")
  })
})

import { assert, describe, it } from "@effect/vitest"
import { makeRepeatGate } from "../../src/platform/Logging.ts"

describe("repeated log lines", () => {
  it("lets the same line through once per window and counts the ones left out on the next", () => {
    const gate = makeRepeatGate(1_000)
    assert.strictEqual(gate("warn event notification dropped", 0), 0)
    for (let i = 1; i <= 14_000; i++) assert.isUndefined(gate("warn event notification dropped", i / 20))
    // Another line (or level) is not held back by the first.
    assert.strictEqual(gate("error event notification dropped", 10), 0)
    assert.strictEqual(gate("warn something else", 10), 0)
    assert.strictEqual(gate("warn event notification dropped", 1_000), 14_000)
    assert.isUndefined(gate("warn event notification dropped", 1_500))
    assert.strictEqual(gate("warn event notification dropped", 2_100), 1)
    assert.strictEqual(gate("warn event notification dropped", 5_000), 0)
  })

  it("forgets old lines instead of growing without bound", () => {
    const gate = makeRepeatGate(1_000, 100)
    for (let i = 0; i < 1_000; i++) assert.strictEqual(gate(`warn line ${i}`, i * 10), 0)
    assert.strictEqual(gate("warn line 999", 9_995), undefined)
  })
})

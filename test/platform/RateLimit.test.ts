import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { LeasedLog, SlidingLog } from "../../src/platform/SlidingWindow.ts"
import { createCompany, request, startServer, type TestServer } from "../support/TestServer.ts"

let server: TestServer
beforeAll(async () => {
  server = await startServer({ rateLimitPerWindow: 5, rateLimitWindowSeconds: 2 })
})
afterAll(() => server?.close())

describe("per-token rate limit", () => {
  it("answers 429 with retry_after and both headers once the window is full, per token", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const remaining: Array<string | null> = []
    for (let i = 0; i < 5; i++) {
      const res = await request(server, "GET", "/v1/me", { token: a.token })
      assert.strictEqual(res.status, 200)
      remaining.push(res.headers.get("x-ratelimit-remaining"))
    }
    assert.deepStrictEqual(remaining, ["4", "3", "2", "1", "0"])
    const limited = await request(server, "GET", "/v1/me", { token: a.token })
    assert.strictEqual(limited.status, 429)
    assert.strictEqual(limited.body.message, "Too Many Requests.")
    assert.ok(Number.isInteger(limited.body.retry_after) && limited.body.retry_after >= 1)
    assert.strictEqual(limited.headers.get("retry-after"), String(limited.body.retry_after))
    assert.strictEqual(limited.headers.get("x-ratelimit-limit"), "5")
    assert.strictEqual(limited.headers.get("x-ratelimit-remaining"), "0")

    const other = await request(server, "GET", "/v1/me", { token: b.token })
    assert.strictEqual(other.status, 200, "another company's token has its own bucket")

    await new Promise((resolve) => setTimeout(resolve, 2100))
    const again = await request(server, "GET", "/v1/me", { token: a.token })
    assert.strictEqual(again.status, 200, "the window slides")
  })

  it("does not count unauthenticated requests against a token", async () => {
    const a = await createCompany(server)
    for (let i = 0; i < 8; i++) await request(server, "GET", "/v1/me", { headers: { authorization: `Bearer ${a.token}x` } })
    const res = await request(server, "GET", "/v1/me", { token: a.token })
    assert.strictEqual(res.status, 200)
  })
})

describe("SlidingLog", () => {
  it("never allows more than the limit in any window, unlike a fixed window", () => {
    const log = new SlidingLog()
    const allowed: Array<number> = []
    // 10 per 1000 ms, hammered every 7 ms for 5 seconds.
    for (let t = 0; t < 5000; t += 7) if (log.consume(t, 10, 1000).allowed) allowed.push(t)
    for (let i = 0; i + 10 < allowed.length; i++) {
      assert.ok(allowed[i + 10] - allowed[i] >= 1000, `11 hits within one window at ${allowed[i]}`)
    }
    assert.ok(allowed.length >= 45, `throughput kept: ${allowed.length}`)
  })

  it("reports the wait until the oldest hit leaves the window", () => {
    const log = new SlidingLog()
    log.consume(0, 2, 1000)
    log.consume(400, 2, 1000)
    const refused = log.consume(500, 2, 1000)
    assert.strictEqual(refused.allowed, false)
    assert.strictEqual(refused.retryAfterMs, 500)
    assert.strictEqual(log.consume(1000, 2, 1000).allowed, true)
  })
})

describe("LeasedLog", () => {
  it("never lets two holders spend more than the limit in any window, however late in the hold they spend", () => {
    const log = new LeasedLog()
    const limit = 50
    const windowMs = 1000
    const holdMs = 100
    const spent: Array<number> = []
    // Two holders lease every 9 ms and 13 ms, spend half their slice at the very end of the hold and hand back the rest.
    for (let t = 0; t < 5000; t++) {
      for (const every of [9, 13]) {
        if (t % every !== 0) continue
        const grant = log.lease(t, limit, windowMs, holdMs, 8)
        if (grant.granted === 0) continue
        const use = Math.ceil(grant.granted / 2)
        for (let i = 0; i < use; i++) spent.push(t + holdMs - 1)
        log.release(grant.lease, grant.granted - use, holdMs - 1)
      }
    }
    spent.sort((a, b) => a - b)
    for (let i = 0; i + limit < spent.length; i++) {
      assert.ok(spent[i + limit] - spent[i] >= windowMs, `more than ${limit} hits within one window at ${spent[i]}`)
    }
    assert.ok(spent.length >= 4 * limit, `throughput kept: ${spent.length}`)
  })

  it("shrinks slices as the budget runs out, refuses when it is gone, and takes back unspent units", () => {
    const log = new LeasedLog()
    const sizes: Array<number> = []
    let grant = log.lease(0, 40, 1000, 100, 100)
    while (grant.granted > 0) {
      sizes.push(grant.granted)
      grant = log.lease(0, 40, 1000, 100, 100)
    }
    assert.strictEqual(sizes.reduce((a, b) => a + b, 0), 40)
    assert.strictEqual(sizes[0], 5)
    assert.strictEqual(sizes[sizes.length - 1], 1)
    // Every unit counts until its hold ends plus the window.
    assert.strictEqual(grant.retryAfterMs, 1100)
    log.release(1, 5, 0)
    const again = log.lease(10, 40, 1000, 100, 100)
    assert.strictEqual(again.granted, 1)
    assert.strictEqual(again.remaining, 4)
  })
})

describe("LeasedLog settling", () => {
  it("counts a settled slice from its last spend, not from the end of its hold", () => {
    const log = new LeasedLog()
    const grant = log.lease(0, 2, 1000, 1000, 2)
    assert.strictEqual(grant.granted, 1)
    assert.strictEqual(log.lease(0, 2, 1000, 1000, 2).granted, 1)
    assert.strictEqual(log.lease(500, 2, 1000, 1000, 2).retryAfterMs, 1500)
    // The first slice was spent 10 ms after its lease: it leaves the window at 1010, not 2000.
    log.release(grant.lease, 0, 10)
    assert.strictEqual(log.lease(1009, 2, 1000, 1000, 2).granted, 0)
    assert.strictEqual(log.lease(1010, 2, 1000, 1000, 2).granted, 1)
  })
})

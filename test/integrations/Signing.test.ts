import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import { Webhook } from "standardwebhooks"
import { isBlockedAddress, OutboundHttp } from "../../src/platform/OutboundHttp.ts"
import { backoffMillis, backoffSchedule, deliveryHeaders, envelope, generateSigningSecret, isSigningSecret, sign } from "../../src/integrations/Signing.ts"

describe("webhook signing and backoff", () => {
  it("signs as Standard Webhooks does, with a generated whsec_ key", () => {
    const secret = generateSigningSecret()
    assert.isTrue(isSigningSecret(secret))
    assert.isFalse(isSigningSecret("whsec_c2hvcnQ="))
    assert.isFalse(isSigningSecret("plain"))
    const body = envelope({ id: "evt_1", seq: 9, event: "message.created", companyId: 3, occurredAt: "2026-01-01T00:00:00.000Z", dataJson: "{\"a\":1}" })
    assert.deepStrictEqual(JSON.parse(body), { id: "evt_1", seq: 9, event: "message.created", company_id: 3, occurred_at: "2026-01-01T00:00:00.000Z", data: { a: 1 } })
    const at = new Date("2026-03-01T12:00:00Z")
    const ours = sign(secret, "evt_1", at.getTime() / 1000, body)
    assert.strictEqual(ours, new Webhook(secret).sign("evt_1", at, body))
    const headers = deliveryHeaders({ signatureHeader: "webhook-signature", authType: null }, { signingSecret: secret }, "evt_1", Math.floor(Date.now() / 1000), body)
    assert.deepStrictEqual(new Webhook(secret).verify(body, headers), JSON.parse(body))
  })

  it("backs off 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h, 6 h, 12 h (±20%), then stays at 12 h", () => {
    assert.deepStrictEqual(backoffSchedule, [5, 30, 120, 600, 1800, 3600, 10800, 21600, 43200])
    assert.deepStrictEqual([1, 2, 3, 9, 10, 14].map((n) => backoffMillis(n, 0.5)), [5_000, 30_000, 120_000, 43_200_000, 43_200_000, 43_200_000])
    assert.strictEqual(backoffMillis(1, 0), 4_000)
    assert.strictEqual(backoffMillis(1, 0.999999), 6_000)
    assert.strictEqual(backoffMillis(2, 0.5, 0.01), 300)
  })
})

describe("OutboundHttp SSRF guard", () => {
  it("classifies loopback, private, link-local, CGNAT, multicast and metadata addresses, v4, v6 and v4-mapped", () => {
    for (const a of ["127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1", "224.0.0.1", "0.0.0.0", "::1", "::", "fe80::1", "fd00:ec2::254", "ff02::1", "::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:a9fe:a9fe", "[::1]"]) {
      assert.isTrue(isBlockedAddress(a), a)
    }
    for (const a of ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) assert.isFalse(isBlockedAddress(a), a)
  })

  it.effect("refuses 127.0.0.1, 10.0.0.1, 169.254.169.254, [::1] and a name resolving to loopback before sending anything", () =>
    Effect.gen(function*() {
      for (const url of ["http://127.0.0.1:9/x", "http://10.0.0.1/x", "http://169.254.169.254/latest/meta-data", "http://[::1]:9/x", "http://localhost:9/x", "https://[::ffff:127.0.0.1]/"]) {
        const result = yield* Effect.result(OutboundHttp.make.request({ url, headers: {}, body: "{}", timeoutMs: 2_000, allowPrivate: false }))
        assert.isTrue(Result.isFailure(result), url)
        if (Result.isFailure(result)) {
          assert.strictEqual(result.failure.reason, "refused", url)
          assert.match(result.failure.message, /^Refused: /)
        }
      }
      const invalid = yield* Effect.result(OutboundHttp.make.request({ url: "ftp://example.com/", headers: {}, timeoutMs: 1_000, allowPrivate: false }))
      assert.isTrue(Result.isFailure(invalid) && invalid.failure.reason === "invalid_url")
    }))
})

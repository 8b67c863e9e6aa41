import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { Webhook } from "standardwebhooks"
import { afterAll, beforeAll } from "vitest"
import { DeliveryRepo } from "../../src/integrations/DeliveryRepo.ts"
import { emitEvent } from "../auth/support.ts"
import { createChannel } from "../messages/support.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { createWebhook, freshDatabase, type Receiver, signingSecret, sleep, startReceiver, waitFor, webhookBody } from "./support.ts"
import { query } from "../support/Sql.ts"

/** A server on a database of its own (see freshDatabase), with its options for delivery tests. */
const isolatedServer = async (overrides: Parameters<typeof startServer>[0]) => {
  const database = await freshDatabase()
  const running = await startServer({
    ...(database === null ? {} : { databaseUrl: Option.some(Redacted.make(database.url)) }),
    ...overrides
  })
  return { ...running, close: () => running.close().then(() => database?.drop()) }
}

let server: RunningServer
let receiver: Receiver
beforeAll(async () => {
  server = await isolatedServer({
    webhookAllowPrivate: true,
    webhookAllowHttp: true,
    // 5 s, 30 s, 2 min… become 50 ms, 300 ms, 1.2 s…
    webhookBackoffScale: 0.01,
    webhookPollMs: 100,
    webhookLeaseMarginMs: 2_000
  })
})
afterAll(() => server?.close())

const fresh = async () => {
  receiver = await startReceiver()
  return receiver
}

const integration = async (token: string, id: number) => (await request(server, "GET", `/v1/integrations/${id}`, { token })).body.data
const logs = async (token: string, id: number) => (await request(server, "GET", `/v1/integrations/${id}/logs`, { token })).body.data as Array<any>
const deliveries = (id: number) =>
  query<{ state: string; attempts: number }>(server, "SELECT state, attempts FROM webhook_deliveries WHERE integration_id = $1 ORDER BY id", [id])

describe("webhook delivery", () => {
  it("delivers a company's events only to its own integrations; another company's logs are 404", async () => {
    const mine = await startReceiver()
    const theirs = await startReceiver()
    try {
      const a = await createCompany(server)
      const b = await createCompany(server)
      const hookA = await createWebhook(server, a.token, webhookBody(mine.url))
      await createWebhook(server, b.token, webhookBody(theirs.url))
      await emitEvent(server, a.id, "message.created", { message: { id: 1 }, channel_id: 1, conversation_id: 1 })
      await waitFor("the delivery to A", () => (mine.received.length >= 1 ? true : undefined))
      await sleep(400)
      assert.strictEqual(mine.received.length, 1)
      assert.strictEqual(theirs.received.length, 0, "B's integration gets nothing of A's")
      assert.strictEqual((await request(server, "GET", `/v1/integrations/${hookA.id}/logs`, { token: b.token })).status, 404)
    } finally {
      await Promise.all([mine.close(), theirs.close()])
    }
  })

  it("POSTs the event envelope signed per Standard Webhooks; the id is the event's, stable and shared with /v1/events", async () => {
    const r = await fresh()
    try {
      const company = await createCompany(server)
      const hook = await createWebhook(server, company.token, webhookBody(r.url))
      const custom = await createWebhook(server, company.token, webhookBody(`${r.url}/custom`, { signatureHeader: "X-Crm-Signature" }))
      await emitEvent(server, company.id, "conversation.created", { conversation_id: 1, channel_id: 5 })
      await emitEvent(server, company.id, "message.created", { message: { id: 7, text: "hé" }, channel_id: 5, conversation_id: 1 })
      await waitFor("two deliveries", () => (r.received.length >= 2 ? true : undefined))
      await sleep(400)
      assert.strictEqual(r.received.length, 2, "only the subscribed key is delivered, once per integration")
      const plain = r.received.find((x) => x.headers["x-crm-signature"] === undefined)!
      const signed = new Webhook(signingSecret).verify(plain.body, plain.headers as Record<string, string>) as any
      const [event] = await query<{ id: string; seq: string; created_at: Date }>(
        server, "SELECT id, seq, created_at FROM events WHERE company_id = $1 AND key = 'message.created'", [company.id]
      )
      assert.deepStrictEqual(signed, {
        id: `evt_${event.id}`,
        seq: Number(event.seq),
        event: "message.created",
        company_id: company.id,
        occurred_at: new Date(event.created_at).toISOString(),
        data: { message: { id: 7, text: "hé" }, channel_id: 5, conversation_id: 1 }
      })
      assert.deepStrictEqual(Object.keys(JSON.parse(plain.body)), ["id", "seq", "event", "company_id", "occurred_at", "data"])
      assert.strictEqual(plain.headers["webhook-id"], `evt_${event.id}`)
      assert.strictEqual(plain.headers["content-type"], "application/json")
      assert.isUndefined(plain.headers.authorization)
      // The replay carries the same envelope: a webhook is matched to its replayed event by id or seq.
      const replay = await request(server, "GET", "/v1/events", { token: company.token })
      const same = replay.body.data.items.find((e: any) => e.event === "message.created")
      assert.deepStrictEqual(same, signed)

      // A custom signature header carries the same Standard Webhooks signature.
      const other = r.received.find((x) => x.headers["x-crm-signature"] !== undefined)!
      assert.isUndefined(other.headers["webhook-signature"])
      const mapped = { ...other.headers, "webhook-signature": other.headers["x-crm-signature"] } as unknown as Record<string, string>
      assert.strictEqual((new Webhook(signingSecret).verify(other.body, mapped) as any).id, `evt_${event.id}`)
      assert.throws(() => new Webhook(`whsec_${Buffer.from("another-key-of-32-bytes-length!!").toString("base64")}`).verify(plain.body, plain.headers as any))

      const entries = await logs(company.token, hook.id)
      assert.strictEqual(entries.length, 1)
      assert.deepStrictEqual(
        [entries[0].level, entries[0].code, entries[0].context.event_key, entries[0].context.status, entries[0].context.status_code, entries[0].context.attempt, entries[0].context.webhook_id],
        ["info", "webhook.delivery", "message.created", "delivered", 200, 1, `evt_${event.id}`]
      )
      assert.isAtLeast(entries[0].context.duration_ms, 0)
      assert.deepStrictEqual(Object.keys(entries[0]).sort(), ["code", "context", "created_at", "id", "level", "message"])
      const health = (await integration(company.token, custom.id)).health
      assert.isString(health.last_success_at)
      assert.deepStrictEqual([health.last_failure_at, health.consecutive_failures], [null, 0])
    } finally {
      await r.close()
    }
  })

  it("shows a signing secret it made once, at the write that made it; deliveries verify with it; other companies see nothing", async () => {
    const r = await fresh()
    try {
      const company = await createCompany(server)
      const other = await createCompany(server)
      const made = await createWebhook(server, company.token, { ...webhookBody(r.url), secrets: {} })
      assert.match(made.signing_secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
      assert.isTrue(made.credential.secrets.signingSecret)
      const read = await integration(company.token, made.id)
      assert.isUndefined(read.signing_secret)
      assert.notInclude(JSON.stringify(read), made.signing_secret)
      assert.strictEqual((await request(server, "GET", `/v1/integrations/${made.id}`, { token: other.token })).status, 404)
      // A secret the client chose is never echoed back.
      assert.isUndefined((await createWebhook(server, other.token, webhookBody(`${r.url}/own`))).signing_secret)

      await emitEvent(server, company.id, "message.created", { message: { id: 3 }, channel_id: 1, conversation_id: 1 })
      await waitFor("the delivery", () => (r.received.length >= 1 ? true : undefined))
      const delivered = r.received[0]
      assert.strictEqual((new Webhook(made.signing_secret).verify(delivered.body, delivered.headers as Record<string, string>) as any).company_id, company.id)

      // Removing the secret makes a new one, shown once again; keeping it shows nothing.
      const renamed = await request(server, "PATCH", `/v1/integrations/${made.id}`, { token: company.token, body: { name: "Renamed" } })
      assert.isUndefined(renamed.body.data.signing_secret)
      const rotated = await request(server, "PATCH", `/v1/integrations/${made.id}`, { token: company.token, body: { secrets: { signingSecret: null } } })
      assert.strictEqual(rotated.status, 200)
      assert.match(rotated.body.data.signing_secret, /^whsec_/)
      assert.notStrictEqual(rotated.body.data.signing_secret, made.signing_secret)
      const foreign = await request(server, "PATCH", `/v1/integrations/${made.id}`, { token: other.token, body: { secrets: { signingSecret: null } } })
      assert.strictEqual(foreign.status, 404)
      assert.isUndefined(foreign.body.signing_secret)
    } finally {
      await r.close()
    }
  })

  it("adds bearer and basic Authorization headers", async () => {
    const r = await fresh()
    try {
      const company = await createCompany(server)
      await createWebhook(server, company.token, webhookBody(`${r.url}/bearer`, { authType: "bearer" }, { bearerToken: "secret-token" }))
      await createWebhook(server, company.token, webhookBody(`${r.url}/basic`, { authType: "basic" }, { basicUsername: "ann", basicPassword: "p:ss" }))
      await emitEvent(server, company.id, "message.created", { channel_id: 1 })
      await waitFor("two deliveries", () => (r.received.length >= 2 ? true : undefined))
      const auth = r.received.map((x) => x.headers.authorization).sort()
      assert.deepStrictEqual(auth, [`Basic ${Buffer.from("ann:p:ss").toString("base64")}`, "Bearer secret-token"])
    } finally {
      await r.close()
    }
  })

  it("a PATCH of url and secrets applies from the next delivery (the worker's cached settings are refreshed)", async () => {
    const r = await fresh()
    const moved = await startReceiver()
    try {
      const company = await createCompany(server)
      const hook = await createWebhook(server, company.token, webhookBody(r.url))
      await emitEvent(server, company.id, "message.created", { n: 1 })
      await waitFor("the first delivery", () => (r.received.length === 1 ? true : undefined))
      const rotated = `whsec_${Buffer.from("a-rotated-key-of-32-bytes-length").toString("base64")}`
      const patched = await request(server, "PATCH", `/v1/integrations/${hook.id}`, {
        token: company.token,
        body: { settings: { url: moved.url }, secrets: { signingSecret: rotated } }
      })
      assert.strictEqual(patched.status, 200)
      await emitEvent(server, company.id, "message.created", { n: 2 })
      await waitFor("the delivery to the new url", () => (moved.received.length === 1 ? true : undefined))
      const second = moved.received[0]
      assert.strictEqual((new Webhook(rotated).verify(second.body, second.headers as Record<string, string>) as any).data.n, 2)
      assert.throws(() => new Webhook(signingSecret).verify(second.body, second.headers as Record<string, string>))
      assert.strictEqual(r.received.length, 1)
    } finally {
      await moved.close()
      await r.close()
    }
  })

  it("retries failures with backoff under one webhook-id and stops after a success", async () => {
    const r = await fresh()
    r.respond = (_req, i) => ({ status: i < 2 ? 500 : 200 })
    try {
      const company = await createCompany(server)
      const hook = await createWebhook(server, company.token, webhookBody(r.url, { maxAttempts: 5 }))
      await emitEvent(server, company.id, "message.created", { channel_id: 1 })
      await waitFor("three attempts", () => (r.received.length >= 3 ? true : undefined))
      await sleep(1_500)
      assert.strictEqual(r.received.length, 3, "no attempt after the success")
      assert.strictEqual(new Set(r.received.map((x) => x.headers["webhook-id"])).size, 1)
      // Every attempt sends the same envelope, its id the webhook-id.
      assert.strictEqual(new Set(r.received.map((x) => x.body)).size, 1)
      assert.strictEqual(JSON.parse(r.received[0].body).id, r.received[0].headers["webhook-id"])
      // Each retry signs again with its own timestamp; every one verifies.
      for (const x of r.received) new Webhook(signingSecret).verify(x.body, x.headers as Record<string, string>)
      // Backoff: the first retry waits ~50 ms (5 s scaled), the second ~300 ms (30 s scaled), ±20%.
      const gaps = [r.received[1].at - r.received[0].at, r.received[2].at - r.received[1].at]
      assert.isAtLeast(gaps[0], 35)
      assert.isAtLeast(gaps[1], 230)
      const entries = await waitFor("three log entries", async () => {
        const l = await logs(company.token, hook.id)
        return l.length === 3 ? l : undefined
      })
      assert.deepStrictEqual(entries.map((e) => [e.level, e.context.status, e.context.status_code, e.context.attempt]), [
        ["info", "delivered", 200, 3],
        ["error", "retrying", 500, 2],
        ["error", "retrying", 500, 1]
      ])
      const health = (await integration(company.token, hook.id)).health
      assert.deepStrictEqual([health.consecutive_failures, health.last_error], [0, "The receiver answered HTTP 500."])
      assert.isString(health.last_failure_at)
      assert.isAtLeast(Date.parse(health.last_success_at), Date.parse(health.last_failure_at))
      assert.deepStrictEqual(await deliveries(hook.id), [{ state: "delivered", attempts: 3 }])
    } finally {
      await r.close()
    }
  })

  it("gives up after maxAttempts, or after one attempt without retryEnabled", async () => {
    const r = await fresh()
    r.respond = () => ({ status: 503 })
    try {
      const company = await createCompany(server)
      const two = await createWebhook(server, company.token, webhookBody(`${r.url}/two`, { maxAttempts: 2 }))
      const once = await createWebhook(server, company.token, webhookBody(`${r.url}/once`, { retryEnabled: false }))
      await emitEvent(server, company.id, "message.created", { channel_id: 1 })
      await waitFor("three attempts", () => (r.received.length >= 3 ? true : undefined))
      await sleep(1_000)
      assert.deepStrictEqual(r.received.map((x) => x.headers.host !== undefined && x.body.length > 0).length, 3)
      await waitFor("both failed", async () => {
        const [a, b] = [await deliveries(two.id), await deliveries(once.id)]
        return a[0]?.state === "failed" && b[0]?.state === "failed" ? true : undefined
      })
      assert.deepStrictEqual(await deliveries(two.id), [{ state: "failed", attempts: 2 }])
      assert.deepStrictEqual(await deliveries(once.id), [{ state: "failed", attempts: 1 }])
      assert.deepStrictEqual((await logs(company.token, two.id)).map((e) => e.context.status), ["failed", "retrying"])
      const health = (await integration(company.token, two.id)).health
      assert.deepStrictEqual([health.consecutive_failures, health.last_success_at, health.last_error], [2, null, "The receiver answered HTTP 503."])
      assert.strictEqual((await integration(company.token, two.id)).status, "active")
    } finally {
      await r.close()
    }
  })

  it("holds at most `concurrency` requests in flight per integration", async () => {
    const r = await fresh()
    r.respond = () => ({ status: 200, delayMs: 250 })
    try {
      const company = await createCompany(server)
      await createWebhook(server, company.token, webhookBody(r.url, { concurrency: 2 }))
      for (let i = 0; i < 8; i++) await emitEvent(server, company.id, "message.created", { n: i })
      await waitFor("eight deliveries", () => (r.received.length >= 8 ? true : undefined))
      assert.strictEqual(r.maxInFlight(), 2)
      assert.strictEqual(new Set(r.received.map((x) => x.headers["webhook-id"])).size, 8)
    } finally {
      await r.close()
    }
  })

  it("counts a timeout as a failed attempt and retries it", async () => {
    const r = await fresh()
    r.respond = (_req, i) => (i === 0 ? { status: 200, delayMs: 2_500 } : { status: 200 })
    try {
      const company = await createCompany(server)
      const hook = await createWebhook(server, company.token, webhookBody(r.url, { timeoutSeconds: 1 }))
      await emitEvent(server, company.id, "message.created", { channel_id: 1 })
      const entries = await waitFor("two log entries", async () => {
        const l = await logs(company.token, hook.id)
        return l.length >= 2 ? l : undefined
      })
      assert.deepStrictEqual(entries.map((e) => [e.context.status, e.context.status_code]), [["delivered", 200], ["retrying", null]])
      assert.isAtLeast(entries[1].context.duration_ms, 950)
      assert.isBelow(entries[1].context.duration_ms, 2_000)
      assert.match(entries[1].message, /Timed out/)
      assert.strictEqual(r.received[0].headers["webhook-id"], r.received[1].headers["webhook-id"])
    } finally {
      await r.close()
    }
  })

  it("410 Gone disables the integration at once; re-enabling resumes from the backlog", async () => {
    const r = await fresh()
    r.respond = () => ({ status: 410 })
    try {
      const company = await createCompany(server)
      const hook = await createWebhook(server, company.token, webhookBody(r.url))
      await emitEvent(server, company.id, "message.created", { n: 1 })
      await waitFor("disabled", async () => ((await integration(company.token, hook.id)).status === "disabled" ? true : undefined))
      const [disabled] = await query<{ payload: any }>(server, "SELECT payload FROM events WHERE company_id = $1 AND key = 'integration.disabled'", [company.id])
      assert.deepStrictEqual([disabled.payload.id, disabled.payload.reason], [hook.id, "gone"])
      await emitEvent(server, company.id, "message.created", { n: 2 })
      await sleep(500)
      assert.strictEqual(r.received.length, 1, "nothing is sent while disabled")
      r.respond = () => ({ status: 200 })
      const enabled = await request(server, "PATCH", `/v1/integrations/${hook.id}`, { token: company.token, body: { status: "active" } })
      assert.strictEqual(enabled.body.data.status, "active")
      await waitFor("the backlog", () => (r.received.length >= 2 ? true : undefined))
      await sleep(300)
      assert.deepStrictEqual(r.received.map((x) => JSON.parse(x.body).data.n), [1, 2])
      assert.strictEqual((await integration(company.token, hook.id)).health.consecutive_failures, 0)
    } finally {
      await r.close()
    }
  })

  it("100 consecutive failures disable an integration only once they span 24 hours", async () => {
    const r = await fresh()
    r.respond = () => ({ status: 500 })
    try {
      const company = await createCompany(server)
      const old = await createWebhook(server, company.token, webhookBody(`${r.url}/old`, { retryEnabled: false }))
      const recent = await createWebhook(server, company.token, webhookBody(`${r.url}/recent`, { retryEnabled: false }))
      await query(server, "UPDATE integrations SET consecutive_failures = 99, failing_since = now() - interval '25 hours' WHERE id = $1", [old.id])
      await query(server, "UPDATE integrations SET consecutive_failures = 99, failing_since = now() - interval '1 hour' WHERE id = $1", [recent.id])
      await emitEvent(server, company.id, "message.created", { n: 1 })
      await waitFor("disabled", async () => ((await integration(company.token, old.id)).status === "disabled" ? true : undefined))
      await waitFor("recent attempted", async () => ((await integration(company.token, recent.id)).health.consecutive_failures === 100 ? true : undefined))
      assert.strictEqual((await integration(company.token, recent.id)).status, "active")
      const events = await query<{ payload: any }>(server, "SELECT payload FROM events WHERE company_id = $1 AND key = 'integration.disabled'", [company.id])
      assert.deepStrictEqual(events.map((e) => [e.payload.id, e.payload.reason, e.payload.consecutive_failures]), [[old.id, "consecutive_failures", 100]])
    } finally {
      await r.close()
    }
  })

  it("the channel filter passes events of the selected channels and events without a channel", async () => {
    const r = await fresh()
    try {
      const company = await createCompany(server)
      const [a, b] = [await createChannel(server, company.token, "msgr_b"), await createChannel(server, company.token, "msgr_b")]
      await createWebhook(server, company.token, webhookBody(r.url, {
        selectedEventKeys: ["message.created", "contact.created"],
        channelFilter: "selected",
        channelIds: [a]
      }))
      await emitEvent(server, company.id, "message.created", { channel_id: b, n: "b" })
      await emitEvent(server, company.id, "message.created", { channel_id: a, n: "a" })
      await emitEvent(server, company.id, "contact.created", { contact_id: 1, n: "none" })
      await waitFor("two deliveries", () => (r.received.length >= 2 ? true : undefined))
      await sleep(400)
      assert.deepStrictEqual(r.received.map((x) => JSON.parse(x.body).data.n).sort(), ["a", "none"])
    } finally {
      await r.close()
    }
  })

  it("test-webhook sends one signed webhook.test event and saves nothing", async () => {
    const r = await fresh()
    try {
      const company = await createCompany(server)
      const res = await request(server, "POST", "/v1/integrations/test-webhook", {
        token: company.token,
        body: { url: r.url, secrets: { signingSecret, bearerToken: "t" }, settings: { authType: "bearer" } }
      })
      assert.strictEqual(res.status, 200, JSON.stringify(res.body))
      assert.deepStrictEqual([res.body.data.ok, res.body.data.status_code, "error" in res.body.data], [true, 200, false])
      assert.isNumber(res.body.data.duration_ms)
      assert.strictEqual(r.received.length, 1)
      const event = new Webhook(signingSecret).verify(r.received[0].body, r.received[0].headers as Record<string, string>) as any
      assert.deepStrictEqual([event.event, event.company_id, event.seq], ["webhook.test", company.id, 0])
      assert.match(event.id, /^evt_test_/)
      assert.strictEqual(r.received[0].headers.authorization, "Bearer t")
      r.respond = () => ({ status: 500 })
      const failed = await request(server, "POST", "/v1/integrations/test-webhook", { token: company.token, body: { url: r.url, event_key: "contact.created" } })
      assert.deepStrictEqual([failed.body.data.ok, failed.body.data.status_code, failed.body.data.error], [false, 500, "The receiver answered HTTP 500."])
      assert.strictEqual(JSON.parse(r.received[1].body).event, "contact.created")
      await sleep(300)
      assert.strictEqual(r.received.length, 2, "sent once, never retried")
      assert.deepStrictEqual((await query(server, "SELECT id FROM integrations WHERE company_id = $1", [company.id])), [])
    } finally {
      await r.close()
    }
  })

  it("never sends unsigned: secrets that do not decrypt fail the attempt with the reason", async () => {
    const r = await fresh()
    try {
      const company = await createCompany(server)
      const hook = await createWebhook(server, company.token, webhookBody(r.url, { retryEnabled: false }))
      await query(server, "UPDATE integrations SET secrets = '\\x00'::bytea WHERE id = $1", [hook.id])
      await emitEvent(server, company.id, "message.created", { n: 1 })
      const health = await waitFor("a failed attempt", async () => {
        const h = (await integration(company.token, hook.id)).health
        return h.consecutive_failures === 1 ? h : undefined
      })
      assert.match(health.last_error, /could not be decrypted/)
      assert.strictEqual(r.received.length, 0)
    } finally {
      await r.close()
    }
  })

  it("keeps logs and finished deliveries for 30 days", async () => {
    const company = await createCompany(server)
    const hook = await createWebhook(server, company.token, webhookBody("https://hooks.example.test/x"))
    await query(server, `INSERT INTO integration_logs (company_id, integration_id, level, code, message, context, created_at)
      VALUES ($1, $2, 'info', 'webhook.delivery', 'old', '{}', now() - interval '31 days'),
             ($1, $2, 'info', 'webhook.delivery', 'new', '{}', now() - interval '29 days')`, [company.id, hook.id])
    await server.runInApp(
      DeliveryRepo.use((repo) => repo.prune(new Date(Date.now() - 30 * 24 * 3600_000))).pipe(Effect.provide(DeliveryRepo.layer))
    )
    const left = await query<{ message: string }>(server, "SELECT message FROM integration_logs WHERE integration_id = $1", [hook.id])
    assert.deepStrictEqual(left.map((l) => l.message), ["new"])
  })
})

describe("SSRF guard at delivery time", () => {
  let guarded: RunningServer
  beforeAll(async () => {
    guarded = await isolatedServer({ webhookAllowHttp: true, webhookPollMs: 100 })
  })
  afterAll(() => guarded?.close())

  it("refuses loopback targets, by address or by a name resolving to one, as failed attempts with the reason", async () => {
    const r = await startReceiver()
    try {
      const company = await createCompany(guarded)
      const byIp = await createWebhook(guarded, company.token, webhookBody(r.url, { retryEnabled: false }))
      const byName = await createWebhook(guarded, company.token, webhookBody(`http://localhost:${r.port}/hook`, { retryEnabled: false }))
      await emitEvent(guarded, company.id, "message.created", { n: 1 })
      for (const hook of [byIp, byName]) {
        const health = await waitFor("a refused attempt", async () => {
          const h = (await request(guarded, "GET", `/v1/integrations/${hook.id}`, { token: company.token })).body.data.health
          return h.consecutive_failures === 1 ? h : undefined
        })
        assert.match(health.last_error, /^Refused: .* resolves to (127\.0\.0\.1|::1)/)
      }
      assert.strictEqual(r.received.length, 0)
    } finally {
      await r.close()
    }
  })
})

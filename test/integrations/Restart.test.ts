import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { type ServerProcess, spawnServer } from "../support/Processes.ts"
import { createCompany, request, type TestServer } from "../support/TestServer.ts"
import { createWebhook, freshDatabase, type Receiver, sleep, startReceiver, waitFor, webhookBody } from "./support.ts"

const platformKey = `webhooks-platform-key-${Math.random().toString(36).slice(2)}`
const asTestServer = (p: ServerProcess): TestServer => ({ url: p.url, platformKey, close: async () => {} })

describe.runIf(process.env.DATABASE_URL)("webhook delivery across a kill -9", () => {
  let database: { readonly url: string; readonly drop: () => Promise<void> }
  let receiver: Receiver
  const processes: Array<ServerProcess> = []

  beforeAll(async () => {
    database = (await freshDatabase())!
    receiver = await startReceiver()
  }, 60_000)

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop(2_000)))
    await receiver?.close()
    await database?.drop()
  }, 60_000)

  it("delivers an event once after the server died with its attempt in flight and another in the outbox", async () => {
    const env = {
      DATABASE_URL: database.url,
      CLUSTER: "single",
      PLATFORM_API_KEY: platformKey,
      WEBHOOK_ALLOW_PRIVATE: "true",
      WEBHOOK_ALLOW_HTTP: "true",
      WEBHOOK_POLL_MS: "200",
      WEBHOOK_LEASE_MARGIN_MS: "1000"
    }
    const first = await spawnServer("webhooks-1", env, { readyTimeoutMs: 90_000 })
    processes.push(first)
    // The first request never gets an answer before the crash; every later one is answered 200.
    receiver.respond = (_req, i) => (i === 0 ? { status: 200, delayMs: 120_000 } : { status: 200 })
    const company = await createCompany(asTestServer(first))
    const hook = await createWebhook(asTestServer(first), company.token, webhookBody(receiver.url, {
      selectedEventKeys: ["contact.created"],
      concurrency: 1,
      timeoutSeconds: 3
    }))
    const create = (server: ServerProcess, firstName: string) =>
      request(asTestServer(server), "POST", "/v1/contacts", { token: company.token, body: { firstName } })
    assert.strictEqual((await create(first, "Ann")).status, 201)
    await waitFor("the first attempt", () => (receiver.received.length === 1 ? true : undefined), 20_000)
    // Committed, but behind the one in flight (concurrency 1): still only in the outbox.
    assert.strictEqual((await create(first, "Bob")).status, 201)
    await sleep(300)
    process.kill(first.pid!, "SIGKILL")
    await first.stop(1_000)

    const second = await spawnServer("webhooks-2", env, { readyTimeoutMs: 90_000 })
    processes.push(second)
    await waitFor("both events delivered", () => (receiver.received.length >= 3 ? true : undefined), 30_000)
    await sleep(1_500)
    const names = receiver.received.map((r) => JSON.parse(r.body).data.contact.firstName)
    assert.deepStrictEqual(names, ["Ann", "Ann", "Bob"], "Ann once more after the crash, Bob once, nothing after success")
    assert.strictEqual(receiver.received[0].headers["webhook-id"], receiver.received[1].headers["webhook-id"])
    const logs = await request(asTestServer(second), "GET", `/v1/integrations/${hook.id}/logs`, { token: company.token })
    assert.deepStrictEqual(logs.body.data.map((l: any) => [l.context.status, l.context.status_code]), [["delivered", 200], ["delivered", 200]])
  }, 240_000)
})

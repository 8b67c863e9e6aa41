import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { createChannel } from "../messages/support.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { createWebhook, signingSecret, webhookBody } from "./support.ts"
import { query } from "../support/Sql.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const url = "https://hooks.example.test/crm"

describe("webhook integrations", () => {
  it("creates with defaults, never returns secrets, lists with filters, reads, rotates, deletes", async () => {
    const company = await createCompany(server)
    const created = await createWebhook(server, company.token, {
      type: "webhook",
      name: " Orders ",
      status: "active",
      settings: { url, selectedEventKeys: ["message.created", "conversation.created"] },
      secrets: { bearerToken: "tok-1" }
    })
    assert.deepStrictEqual(Object.keys(created).sort(), [
      "company_id", "created_at", "credential", "external_entities", "funnel_mappings", "health", "id", "mappings", "name",
      "settings", "signing_secret", "status", "type", "updated_at"
    ])
    assert.match(created.signing_secret, /^whsec_/)
    assert.deepStrictEqual([created.name, created.type, created.status, created.company_id], ["Orders", "webhook", "active", company.id])
    assert.deepStrictEqual(created.settings, {
      url,
      description: null,
      signatureHeader: "webhook-signature",
      authType: null,
      selectedEventKeys: ["message.created", "conversation.created"],
      channelFilter: "all",
      channelIds: [],
      timeoutSeconds: 10,
      retryEnabled: true,
      maxAttempts: 8,
      concurrency: 4
    })
    assert.deepStrictEqual(created.health, { last_success_at: null, last_failure_at: null, last_error: null, consecutive_failures: 0 })
    // The signing secret was generated: its value travels back once, in this answer, and never again.
    assert.deepStrictEqual(created.credential.secrets, { signingSecret: true, bearerToken: true, basicUsername: false, basicPassword: false })
    assert.strictEqual(created.credential.rotated_at, null)
    assert.deepStrictEqual([created.external_entities, created.mappings, created.funnel_mappings], [[], [], []])
    assert.notInclude(JSON.stringify(created), "tok-1")
    // Encrypted at rest: the stored bytes do not contain the token.
    const [stored] = await query<{ secrets: Uint8Array }>(server, "SELECT secrets FROM integrations WHERE id = $1", [created.id])
    assert.notInclude(Buffer.from(stored.secrets).toString("latin1"), "tok-1")

    const got = await request(server, "GET", `/v1/integrations/${created.id}`, { token: company.token })
    const { signing_secret: _shownOnce, ...stored_ } = created
    assert.deepStrictEqual([got.status, got.body.data], [200, stored_])
    assert.notInclude(JSON.stringify(got.body), "whsec_")

    const second = await createWebhook(server, company.token, { ...webhookBody(url), status: "disabled" })
    const all = await request(server, "GET", "/v1/integrations", { token: company.token })
    assert.deepStrictEqual(all.body.data.map((i: any) => i.id), [created.id, second.id])
    const disabled = await request(server, "GET", "/v1/integrations?status=disabled&type=webhook", { token: company.token })
    assert.deepStrictEqual(disabled.body.data.map((i: any) => i.id), [second.id])
    const bad = await request(server, "GET", "/v1/integrations?status=paused", { token: company.token })
    assert.strictEqual(bad.status, 422)

    // Settings merge; secrets given rotate the credential.
    const patched = await request(server, "PATCH", `/v1/integrations/${created.id}`, {
      token: company.token,
      body: { settings: { timeoutSeconds: 5, authType: "bearer" }, secrets: { bearerToken: "tok-2", signingSecret } }
    })
    assert.strictEqual(patched.status, 200, JSON.stringify(patched.body))
    assert.deepStrictEqual([patched.body.data.settings.timeoutSeconds, patched.body.data.settings.authType, patched.body.data.settings.url], [5, "bearer", url])
    assert.isString(patched.body.data.credential.rotated_at)
    assert.notInclude(JSON.stringify(patched.body), "tok-2")
    // A PATCH without secrets keeps them and the rotation time.
    const renamed = await request(server, "PATCH", `/v1/integrations/${created.id}`, { token: company.token, body: { name: "Renamed" } })
    assert.deepStrictEqual([renamed.body.data.name, renamed.body.data.credential.rotated_at], ["Renamed", patched.body.data.credential.rotated_at])
    assert.deepStrictEqual(renamed.body.data.credential.secrets.bearerToken, true)

    const removed = await request(server, "DELETE", `/v1/integrations/${second.id}`, { token: company.token })
    assert.deepStrictEqual([removed.status, removed.body], [200, { data: { message: "Integration deleted." } }])
    assert.strictEqual((await request(server, "GET", `/v1/integrations/${second.id}`, { token: company.token })).status, 404)

    const summary = await request(server, "GET", "/v1/integrations/summary", { token: company.token })
    assert.deepStrictEqual([summary.status, summary.body], [200, { data: [{ type: "webhook", count: 1 }] }])
  })

  it("answers 422 for bad settings and secrets, and writes nothing", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const foreignChannel = await createChannel(server, other.token, "msgr_b")
    const cases: Array<[Record<string, unknown>, string, Record<string, unknown>?]> = [
      [{ url: "http://hooks.example.test/x" }, "settings.url"],
      [{ url: "not a url" }, "settings.url"],
      [{ url: undefined }, "settings.url"],
      [{ timeoutSeconds: 0 }, "settings.timeoutSeconds"],
      [{ timeoutSeconds: 31 }, "settings.timeoutSeconds"],
      [{ maxAttempts: 0 }, "settings.maxAttempts"],
      [{ maxAttempts: 16 }, "settings.maxAttempts"],
      [{ concurrency: 0 }, "settings.concurrency"],
      [{ concurrency: 21 }, "settings.concurrency"],
      [{ selectedEventKeys: [] }, "settings.selectedEventKeys"],
      [{ selectedEventKeys: ["message.created", "no.such.event"] }, "settings.selectedEventKeys"],
      [{ channelFilter: "some" }, "settings.channelFilter"],
      [{ channelFilter: "selected", channelIds: [] }, "settings.channelIds"],
      [{ channelFilter: "selected", channelIds: [foreignChannel] }, "settings.channelIds"],
      [{ authType: "digest" }, "settings.authType"],
      [{ signatureHeader: "bad header" }, "settings.signatureHeader"],
      [{ signatureHeader: "Authorization" }, "settings.signatureHeader"],
      [{ authType: "bearer" }, "secrets.bearerToken"],
      [{ authType: "basic" }, "secrets.basicPassword", { basicUsername: "u" }],
      [{}, "secrets.signingSecret", { signingSecret: "plain-secret" }]
    ]
    for (const [settings, field, secrets] of cases) {
      const body = webhookBody(url, settings, secrets)
      if ("url" in settings && settings.url === undefined) delete (body.settings as any).url
      const res = await request(server, "POST", "/v1/integrations", { token: company.token, body })
      assert.strictEqual(res.status, 422, `${JSON.stringify(settings)}: ${JSON.stringify(res.body)}`)
      assert.isString(res.body.message)
      assert.property(res.body.errors, field, `${JSON.stringify(settings)}: ${JSON.stringify(res.body)}`)
    }
    for (const body of [{ ...webhookBody(url), type: "zapier" }, { ...webhookBody(url), name: "" }, { ...webhookBody(url), status: "paused" }]) {
      assert.strictEqual((await request(server, "POST", "/v1/integrations", { token: company.token, body })).status, 422)
    }
    const listed = await request(server, "GET", "/v1/integrations", { token: company.token })
    assert.deepStrictEqual(listed.body.data, [])

    // The company's own channel is accepted; a PATCH is validated as a whole and 422s leave the row alone.
    const own = await createChannel(server, company.token, "msgr_b")
    const created = await createWebhook(server, company.token, webhookBody(url, { channelFilter: "selected", channelIds: [own] }))
    assert.deepStrictEqual(created.settings.channelIds, [own])
    const badPatch = await request(server, "PATCH", `/v1/integrations/${created.id}`, {
      token: company.token,
      body: { name: "Changed", settings: { maxAttempts: 99 } }
    })
    assert.deepStrictEqual([badPatch.status, Object.keys(badPatch.body.errors)], [422, ["settings.maxAttempts"]])
    const noToken = await request(server, "PATCH", `/v1/integrations/${created.id}`, { token: company.token, body: { settings: { authType: "bearer" } } })
    assert.deepStrictEqual([noToken.status, Object.keys(noToken.body.errors)], [422, ["secrets.bearerToken"]])
    const unchanged = await request(server, "GET", `/v1/integrations/${created.id}`, { token: company.token })
    assert.deepStrictEqual(unchanged.body.data, created)
    const badLimit = await request(server, "GET", `/v1/integrations/${created.id}/logs?limit=0`, { token: company.token })
    assert.strictEqual(badLimit.status, 422)
  })

  it("http URLs are accepted only with WEBHOOK_ALLOW_HTTP", async () => {
    const open = await startServer({ webhookAllowHttp: true })
    try {
      const company = await createCompany(open)
      const created = await createWebhook(open, company.token, webhookBody("http://hooks.example.test/x"))
      assert.strictEqual(created.settings.url, "http://hooks.example.test/x")
    } finally {
      await open.close()
    }
  })

  it("another company's integration is 404 on every route", async () => {
    const owner = await createCompany(server)
    const intruder = await createCompany(server)
    const created = await createWebhook(server, owner.token, webhookBody(url))
    const routes: Array<[string, string, unknown?]> = [
      ["GET", `/v1/integrations/${created.id}`],
      ["PATCH", `/v1/integrations/${created.id}`, { name: "Mine now" }],
      ["DELETE", `/v1/integrations/${created.id}`],
      ["GET", `/v1/integrations/${created.id}/logs`]
    ]
    for (const [method, path, body] of routes) {
      const res = await request(server, method, path, { token: intruder.token, body })
      assert.strictEqual(res.status, 404, `${method} ${path}`)
      assert.deepStrictEqual(res.body, { message: "Integration not found." })
    }
    // Lists, summary and the unsaved test see only the caller's own.
    assert.deepStrictEqual((await request(server, "GET", "/v1/integrations", { token: intruder.token })).body.data, [])
    assert.deepStrictEqual((await request(server, "GET", "/v1/integrations/summary", { token: intruder.token })).body.data, [{ type: "webhook", count: 0 }])
    const still = await request(server, "GET", `/v1/integrations/${created.id}`, { token: owner.token })
    assert.deepStrictEqual([still.status, still.body.data.name], [200, "Receiver"])
  })

  it("integration.* permissions: a manager reads, an agent gets 403", async () => {
    const company = await createCompany(server)
    const created = await createWebhook(server, company.token, webhookBody(url))
    const manager = await addUser(server, company.id, { role: "manager" })
    const agent = await addUser(server, company.id, { role: "agent" })
    const managerToken = (await mobileLogin(server, manager.email, manager.password)).body.data.token as string
    const agentToken = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
    assert.strictEqual((await request(server, "GET", `/v1/integrations/${created.id}`, { token: managerToken })).status, 200)
    assert.strictEqual((await request(server, "POST", "/v1/integrations", { token: managerToken, body: webhookBody(url) })).status, 403)
    assert.strictEqual((await request(server, "DELETE", `/v1/integrations/${created.id}`, { token: managerToken })).status, 403)
    for (const [method, path] of [["GET", "/v1/integrations"], ["GET", `/v1/integrations/${created.id}`], ["GET", "/v1/integrations/summary"], ["GET", "/v1/integration-providers"]]) {
      assert.strictEqual((await request(server, method, path, { token: agentToken })).status, 403, path)
    }
    assert.strictEqual((await request(server, "POST", "/v1/integrations/test-webhook", { token: agentToken, body: { url } })).status, 403)
    assert.strictEqual((await request(server, "GET", "/v1/integrations")).status, 401)
  })

  it("lists the provider catalog by published flag, and the event catalog has every emitted key", async () => {
    const company = await createCompany(server)
    const providers = await request(server, "GET", "/v1/integration-providers", { token: company.token })
    assert.deepStrictEqual(providers.body.data.map((p: any) => [p.key, p.is_published]), [["webhook", true]])
    assert.deepStrictEqual(Object.keys(providers.body.data[0]).sort(), ["created_at", "description", "id", "is_published", "key", "name", "updated_at"])
    assert.deepStrictEqual((await request(server, "GET", "/v1/integration-providers?published=false", { token: company.token })).body.data, [])
    assert.strictEqual((await request(server, "GET", "/v1/integration-providers?published=maybe", { token: company.token })).status, 422)
    const catalog = await request(server, "GET", "/v1/system-events?group=integrations", { token: company.token })
    assert.deepStrictEqual(catalog.body.data.map((e: any) => e.key), ["integration.disabled"])
  })

  it("test-webhook validates its input (422) and reports a failed delivery without saving anything", async () => {
    const company = await createCompany(server)
    const cases: Array<[unknown, string]> = [
      [{ url: "http://hooks.example.test/x" }, "url"],
      [{ url: "nope" }, "url"],
      [{ url, event_key: "no.such.event" }, "event_key"],
      [{ url, settings: { timeoutSeconds: 60 } }, "settings.timeoutSeconds"],
      [{ url, settings: { authType: "basic" }, secrets: { basicUsername: "u" } }, "secrets.basicPassword"]
    ]
    for (const [body, field] of cases) {
      const res = await request(server, "POST", "/v1/integrations/test-webhook", { token: company.token, body })
      assert.strictEqual(res.status, 422, JSON.stringify(body))
      assert.property(res.body.errors, field, JSON.stringify(res.body))
    }
    // Loopback is refused by the guard in this server (no WEBHOOK_ALLOW_PRIVATE).
    const refused = await request(server, "POST", "/v1/integrations/test-webhook", { token: company.token, body: { url: "https://127.0.0.1:9/x" } })
    assert.strictEqual(refused.status, 200)
    assert.deepStrictEqual([refused.body.data.ok, refused.body.data.status_code], [false, null])
    assert.match(refused.body.data.error, /^Refused/)
    assert.deepStrictEqual((await request(server, "GET", "/v1/integrations", { token: company.token })).body.data, [])
  })
})

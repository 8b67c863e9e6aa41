import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { Channels } from "../../src/channels/Channels.ts"
import { type ChannelContext, type ProviderAdapter, Providers } from "../../src/providers/Provider.ts"
import { SandboxLog } from "../../src/providers/Sandbox.ts"
import { addUser, mobileLogin } from "../auth/support.ts"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import { fileServer } from "../support/FileServer.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request } from "../support/TestServer.ts"

const appUrl = "https://crm.example.test"
const botToken = "700100:AAchannelsTestBotTokenValue_123"
const wa = { access_token: "EAAchannelsAccess", phone_number_id: "1098765", app_secret: "app-secret-1", verify_token: "verify-1" }
const tg = new TelegramFake()
tg.tokens.add(botToken)
const server = fileServer(() => ({ appUrl, telegramApiBase: tg.http.url }), [tg.http])

const channelFields = ["account_name", "company_id", "created_at", "id", "name", "provider", "settings", "status", "type", "updated_at", "webhook_url"]

const create = async (token: string, body: Record<string, unknown>) => {
  const res = await request(server, "POST", "/v1/channels", { token, body })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.data
}

const login = async (email: string) => {
  const res = await mobileLogin(server, email, "password-123")
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.token as string
}

const contextOf = (companyId: number, id: number) =>
  server.runInApp(Channels.use((c) => c.context(companyId, id))).then(Option.getOrThrow)

const provider = <A, E>(ctx: ChannelContext, f: (p: ProviderAdapter) => Effect.Effect<A, E>) =>
  server.runInApp(Effect.flip(Providers.use((p) => f(p.forChannel(ctx)))))

const providerOk = <A, E>(ctx: ChannelContext, f: (p: ProviderAdapter) => Effect.Effect<A, E>) =>
  server.runInApp(Providers.use((p) => f(p.forChannel(ctx))))

describe("channels", () => {
  it("creates, lists, reads, updates and soft-deletes a sandbox channel", async () => {
    const company = await createCompany(server)
    const created = await create(company.token, { type: "msgr_a", provider: "sandbox", name: "  Main line ", account_name: "+1 555 0100" })
    assert.deepStrictEqual(Object.keys(created).sort(), channelFields)
    assert.strictEqual(created.company_id, company.id)
    assert.strictEqual(created.name, "Main line")
    assert.strictEqual(created.account_name, "+1 555 0100")
    assert.strictEqual(created.status, "connected")
    assert.strictEqual(created.webhook_url, null)
    assert.deepStrictEqual(created.settings, {})

    const list = await request(server, "GET", "/v1/channels", { token: company.token })
    assert.strictEqual(list.status, 200)
    assert.deepStrictEqual(list.body.data.map((c: any) => c.id), [created.id])

    const one = await request(server, "GET", `/v1/channels/${created.id}`, { token: company.token })
    assert.deepStrictEqual(one.body.data, created)

    const patched = await request(server, "PATCH", `/v1/channels/${created.id}`, {
      token: company.token,
      body: { name: "Renamed", account_name: null, status: "disconnected", settings: { sandbox_fail: true } }
    })
    assert.strictEqual(patched.status, 200, JSON.stringify(patched.body))
    assert.strictEqual(patched.body.data.name, "Renamed")
    assert.strictEqual(patched.body.data.account_name, null)
    assert.strictEqual(patched.body.data.status, "disconnected")
    assert.deepStrictEqual(patched.body.data.settings, { sandbox_fail: true })
    const untouched = await request(server, "PATCH", `/v1/channels/${created.id}`, { token: company.token, body: {} })
    assert.strictEqual(untouched.body.data.name, "Renamed")
    assert.deepStrictEqual(untouched.body.data.settings, { sandbox_fail: true })

    const deleted = await request(server, "DELETE", `/v1/channels/${created.id}`, { token: company.token })
    assert.strictEqual(deleted.status, 200)
    assert.deepStrictEqual(deleted.body, { data: { message: "Channel deleted." } })
    const [row] = await query<{ deleted_at: Date | null }>(server, "SELECT deleted_at FROM channels WHERE id = $1", [created.id])
    assert.ok(row.deleted_at !== null)
    for (const method of ["GET", "PATCH", "DELETE"]) {
      const gone = await request(server, method, `/v1/channels/${created.id}`, { token: company.token, body: method === "PATCH" ? {} : undefined })
      assert.strictEqual(gone.status, 404, method)
      assert.deepStrictEqual(gone.body, { message: "Channel not found." })
    }
    assert.deepStrictEqual((await request(server, "GET", "/v1/channels", { token: company.token })).body.data, [])
  })

  it("never returns credentials and stores them encrypted", async () => {
    const company = await createCompany(server)
    const telegram = await create(company.token, { type: "msgr_b", provider: "telegram", name: "Bot", credentials: { bot_token: botToken } })
    const whatsapp = await create(company.token, { type: "msgr_a_business", provider: "whatsapp_cloud", name: "WA", credentials: wa })
    assert.strictEqual(telegram.webhook_url, `${appUrl}/hooks/telegram/${telegram.id}`)
    assert.strictEqual(whatsapp.webhook_url, `${appUrl}/hooks/whatsapp/${whatsapp.id}`)
    const secrets = [botToken, wa.access_token, wa.app_secret, wa.verify_token]
    const bodies = [
      JSON.stringify(telegram),
      JSON.stringify(whatsapp),
      JSON.stringify((await request(server, "GET", "/v1/channels", { token: company.token })).body),
      JSON.stringify((await request(server, "GET", `/v1/channels/${whatsapp.id}`, { token: company.token })).body)
    ]
    for (const body of bodies) {
      for (const secret of secrets) assert.ok(!body.includes(secret), `leaked ${secret}`)
      assert.ok(!body.includes("credentials") && !body.includes("webhook_secret"))
    }
    const rows = await query<{ id: number; credentials: Uint8Array; webhook_secret: string }>(
      server,
      "SELECT id, credentials, webhook_secret FROM channels WHERE company_id = $1 ORDER BY id",
      [company.id]
    )
    assert.strictEqual(rows.length, 2)
    for (const row of rows) {
      const raw = Buffer.from(row.credentials)
      assert.ok(raw.length > 28)
      for (const secret of secrets) {
        assert.ok(!raw.includes(Buffer.from(secret)), "plaintext credential in the column")
        assert.ok(!raw.toString("hex").includes(Buffer.from(secret).toString("hex")))
      }
      assert.ok(!raw.includes(Buffer.from("bot_token")) && !raw.includes(Buffer.from("access_token")))
      assert.ok(row.webhook_secret.length >= 32)
    }
    // Decryption gives back exactly what was written, and only the provider's keys.
    const ctx = await contextOf(company.id, whatsapp.id)
    assert.deepStrictEqual(ctx.credentials, wa)
    // A ciphertext moved to another tenant's row does not decrypt there (the company is authenticated data).
    const other = await createCompany(server)
    const foreign = await create(other.token, { type: "msgr_b", provider: "telegram", name: "Bot", credentials: { bot_token: botToken } })
    await query(server, "UPDATE channels SET credentials = $1 WHERE id = $2", [Buffer.from(rows[0].credentials), foreign.id])
    assert.deepStrictEqual((await contextOf(other.id, foreign.id)).credentials, {})
  })

  it("merges patched credentials key by key and validates them", async () => {
    const company = await createCompany(server)
    const channel = await create(company.token, { type: "msgr_a_business", provider: "whatsapp_cloud", name: "WA", credentials: wa })
    const res = await request(server, "PATCH", `/v1/channels/${channel.id}`, {
      token: company.token,
      body: { credentials: { access_token: "EAArotated", bot_token: "ignored:for-this-provider" } }
    })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.deepStrictEqual((await contextOf(company.id, channel.id)).credentials, { ...wa, access_token: "EAArotated" })
    const bad = await request(server, "PATCH", `/v1/channels/${channel.id}`, { token: company.token, body: { credentials: { phone_number_id: "12ab" } } })
    assert.strictEqual(bad.status, 422)
    assert.deepStrictEqual(bad.body.errors, { "credentials.phone_number_id": ["The credentials.phone_number_id field must contain only digits."] })
    const empty = await request(server, "PATCH", `/v1/channels/${channel.id}`, { token: company.token, body: { name: " " } })
    assert.strictEqual(empty.status, 422)
    assert.deepStrictEqual(empty.body.errors, { name: ["The name field is required."] })
  })

  it("validates creation with field errors", async () => {
    const company = await createCompany(server)
    const cases: Array<[Record<string, unknown>, ReadonlyArray<string>]> = [
      [{ type: "msgr_a", provider: "sandbox" }, ["name"]],
      [{ type: "msgr_z", provider: "sandbox", name: "x" }, ["type"]],
      [{ type: "msgr_a", provider: "carrier_pigeon", name: "x" }, ["provider"]],
      [{ type: "msgr_a", provider: "telegram", name: "x", credentials: { bot_token: botToken } }, ["provider"]],
      [{ type: "msgr_b", provider: "whatsapp_cloud", name: "x", credentials: wa }, ["provider"]],
      [{ type: "msgr_b", provider: "telegram", name: "x" }, ["credentials.bot_token"]],
      [{ type: "msgr_b", provider: "telegram", name: "x", credentials: { bot_token: "not a token" } }, ["credentials.bot_token"]],
      [{ type: "msgr_a_business", provider: "whatsapp_cloud", name: "x", credentials: { access_token: "a" } }, [
        "credentials.app_secret",
        "credentials.phone_number_id",
        "credentials.verify_token"
      ]],
      [{ type: "msgr_a", provider: "sandbox", name: "x".repeat(256) }, ["name"]],
      [{ type: "msgr_a", provider: "sandbox", name: "x", credentials: { bot_token: "" } }, ["credentials.bot_token"]]
    ]
    for (const [body, fields] of cases) {
      const res = await request(server, "POST", "/v1/channels", { token: company.token, body })
      assert.strictEqual(res.status, 422, JSON.stringify(body))
      assert.deepStrictEqual(Object.keys(res.body.errors).sort(), [...fields].sort(), JSON.stringify(res.body))
      assert.strictEqual(typeof res.body.message, "string")
    }
    const garbage = await request(server, "POST", "/v1/channels", { token: company.token, raw: "{nope" })
    assert.strictEqual(garbage.status, 400)
    assert.deepStrictEqual((await request(server, "GET", "/v1/channels", { token: company.token })).body.data, [])
    const badId = await request(server, "GET", "/v1/channels/abc", { token: company.token })
    assert.strictEqual(badId.status, 422)
  })

  it("lets agents read only their teams' channels and never write", async () => {
    const company = await createCompany(server)
    const a = await create(company.token, { type: "msgr_a", provider: "sandbox", name: "A" })
    const b = await create(company.token, { type: "msgr_b", provider: "sandbox", name: "B" })
    const agent = await addUser(server, company.id, { role: "agent" })
    const manager = await addUser(server, company.id, { role: "manager" })
    const agentToken = await login(agent.email)
    const managerToken = await login(manager.email)

    assert.deepStrictEqual((await request(server, "GET", "/v1/channels", { token: agentToken })).body.data, [])
    const [team] = await query<{ id: number }>(server, "INSERT INTO teams (company_id, name) VALUES ($1, 'Support') RETURNING id", [company.id])
    await query(server, "INSERT INTO team_members (company_id, team_id, user_id) VALUES ($1, $2, $3)", [company.id, team.id, agent.id])
    await query(server, "INSERT INTO team_channels (company_id, team_id, channel_id) VALUES ($1, $2, $3)", [company.id, team.id, a.id])

    const seen = await request(server, "GET", "/v1/channels", { token: agentToken })
    assert.deepStrictEqual(seen.body.data.map((c: any) => c.id), [a.id])
    assert.strictEqual((await request(server, "GET", `/v1/channels/${a.id}`, { token: agentToken })).status, 200)
    const hidden = await request(server, "GET", `/v1/channels/${b.id}`, { token: agentToken })
    assert.strictEqual(hidden.status, 404)
    assert.deepStrictEqual(hidden.body, { message: "Channel not found." })

    const denied = await request(server, "POST", "/v1/channels", { token: agentToken, body: { type: "msgr_a", provider: "sandbox", name: "Mine" } })
    assert.strictEqual(denied.status, 403)
    assert.strictEqual((await request(server, "PATCH", `/v1/channels/${a.id}`, { token: agentToken, body: { name: "x" } })).status, 403)
    assert.strictEqual((await request(server, "DELETE", `/v1/channels/${a.id}`, { token: agentToken })).status, 403)
    assert.strictEqual((await query(server, "SELECT id FROM channels WHERE company_id = $1", [company.id])).length, 2)

    const managerList = await request(server, "GET", "/v1/channels", { token: managerToken })
    assert.deepStrictEqual(managerList.body.data.map((c: any) => c.id), [a.id, b.id])
    assert.strictEqual((await request(server, "PATCH", `/v1/channels/${b.id}`, { token: managerToken, body: { name: "B2" } })).status, 200)
  })

  it("answers 404 for another company's channel on every route", async () => {
    const owner = await createCompany(server)
    const intruder = await createCompany(server)
    const sandbox = await create(owner.token, { type: "msgr_a", provider: "sandbox", name: "Mine" })
    const bot = await create(owner.token, { type: "msgr_b", provider: "telegram", name: "Bot", credentials: { bot_token: botToken } })
    const routes: Array<[string, string, unknown]> = [
      ["GET", `/v1/channels/${sandbox.id}`, undefined],
      ["PATCH", `/v1/channels/${sandbox.id}`, { name: "Stolen" }],
      ["DELETE", `/v1/channels/${sandbox.id}`, undefined],
      ["POST", `/v1/channels/${bot.id}/webhook`, undefined],
      ["POST", `/v1/channels/${sandbox.id}/sandbox/inbound`, { from: { external_id: "x" }, text: "hi" }],
      ["POST", `/v1/channels/${sandbox.id}/sandbox/status`, { external_message_id: "x", status: "read" }]
    ]
    for (const [method, path, body] of routes) {
      const res = await request(server, method, path, { token: intruder.token, body })
      assert.strictEqual(res.status, 404, `${method} ${path}`)
      assert.deepStrictEqual(res.body, { message: "Channel not found." })
    }
    assert.deepStrictEqual((await request(server, "GET", "/v1/channels", { token: intruder.token })).body.data, [])
    const [row] = await query<{ name: string; deleted_at: Date | null }>(server, "SELECT name, deleted_at FROM channels WHERE id = $1", [sandbox.id])
    assert.deepStrictEqual([row.name, row.deleted_at], ["Mine", null])
    assert.strictEqual(tg.http.calls("setWebhook").length, 0)
  })

  it("registers a Telegram webhook with the channel's secret", async () => {
    const company = await createCompany(server)
    const bot = await create(company.token, { type: "msgr_b", provider: "telegram", name: "Bot", credentials: { bot_token: botToken } })
    const res = await request(server, "POST", `/v1/channels/${bot.id}/webhook`, { token: company.token })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.account_name, "@fake_crm_bot")
    const [row] = await query<{ webhook_secret: string }>(server, "SELECT webhook_secret FROM channels WHERE id = $1", [bot.id])
    assert.deepStrictEqual(tg.webhooks.get(botToken), { url: `${appUrl}/hooks/telegram/${bot.id}`, secret_token: row.webhook_secret })

    tg.http.inject("getMe", { status: 401, body: { ok: false, error_code: 401, description: "Unauthorized" } })
    const refused = await request(server, "POST", `/v1/channels/${bot.id}/webhook`, { token: company.token })
    assert.strictEqual(refused.status, 422)
    assert.strictEqual(refused.body.error_code, "provider_rejected")
    tg.http.inject("getMe", { status: 500, body: { ok: false, error_code: 500, description: "Internal Server Error" } })
    const down = await request(server, "POST", `/v1/channels/${bot.id}/webhook`, { token: company.token })
    assert.strictEqual(down.status, 502)
    assert.match(down.body.message, /Telegram is unavailable/)

    const sandbox = await create(company.token, { type: "msgr_b", provider: "sandbox", name: "S" })
    const notApplicable = await request(server, "POST", `/v1/channels/${sandbox.id}/webhook`, { token: company.token })
    assert.strictEqual(notApplicable.status, 422)
    assert.strictEqual(notApplicable.body.error_code, "webhook_not_applicable")
  })
})

describe("providers", () => {
  it("route each channel to its adapter; a disconnected real channel makes no provider call", async () => {
    const company = await createCompany(server)
    const bot = await create(company.token, { type: "msgr_b", provider: "telegram", name: "Bot", credentials: { bot_token: botToken } })
    const live = await contextOf(company.id, bot.id)
    const sent = await providerOk(live, (p) => p.send(live, { recipient: "31337", text: "through the app", attachments: [], quotedExternalMessageId: null }))
    assert.match(sent.externalMessageId, /^31337:\d+$/)
    assert.strictEqual(tg.http.calls("sendMessage").at(-1)!.body.text, "through the app")
    await request(server, "PATCH", `/v1/channels/${bot.id}`, { token: company.token, body: { status: "disconnected" } })
    const off = await contextOf(company.id, bot.id)
    const before = tg.http.calls("sendMessage").length
    const refused = await provider(off, (p) => p.send(off, { recipient: "31337", text: "x", attachments: [], quotedExternalMessageId: null }))
    assert.strictEqual(refused.code, "channel_offline")
    assert.strictEqual(tg.http.calls("sendMessage").length, before)
  })

  it("simulates sends and records every call; sandbox_fail and disconnected make calls fail channel_offline", async () => {
    const company = await createCompany(server)
    const channel = await create(company.token, { type: "msgr_b", provider: "sandbox", name: "S" })
    const ctx = await contextOf(company.id, channel.id)
    const sent = await providerOk(ctx, (p) => p.send(ctx, { recipient: "42", text: "hi", attachments: [], quotedExternalMessageId: null }))
    assert.match(sent.externalMessageId, /^sbx_[A-Za-z0-9]{24}$/)
    await providerOk(ctx, (p) => p.edit(ctx, "42", sent.externalMessageId, "edited"))
    await providerOk(ctx, (p) => p.revoke(ctx, "42", sent.externalMessageId))
    assert.strictEqual((await provider(ctx, (p) => p.block(ctx, "42"))).code, "not_supported")

    await request(server, "PATCH", `/v1/channels/${channel.id}`, { token: company.token, body: { settings: { sandbox_fail: true } } })
    const failing = await contextOf(company.id, channel.id)
    const offline = await provider(failing, (p) => p.send(failing, { recipient: "42", text: "hi", attachments: [], quotedExternalMessageId: null }))
    assert.deepStrictEqual([offline._tag, offline.code], ["ProviderError", "channel_offline"])

    await request(server, "PATCH", `/v1/channels/${channel.id}`, { token: company.token, body: { settings: { sandbox_fail: false }, status: "disconnected" } })
    const disconnected = await contextOf(company.id, channel.id)
    assert.strictEqual((await provider(disconnected, (p) => p.react(disconnected, "42", "x", "👍"))).code, "channel_offline")

    const calls = await server.runInApp(SandboxLog.useSync((log) => log.calls(channel.id)))
    assert.deepStrictEqual(calls.map((c) => [c.operation, c.outcome]), [
      ["send", "ok"],
      ["edit", "ok"],
      ["revoke", "ok"],
      ["block", "not_supported"],
      ["send", "channel_offline"],
      ["react", "channel_offline"]
    ])
    assert.deepStrictEqual(calls[0].args, { recipient: "42", text: "hi", attachments: 0, template: null })
  })

  it("follows each channel type's rules", async () => {
    const company = await createCompany(server)
    const types = ["msgr_a", "msgr_a_business", "msgr_b", "msgr_c_business"] as const
    const ctx: Record<string, ChannelContext> = {}
    for (const type of types) {
      const channel = await create(company.token, { type, provider: "sandbox", name: type })
      ctx[type] = await contextOf(company.id, channel.id)
    }
    // Revoke: not on the business API; likes: only the social inbox; edits: not on the social inbox.
    assert.strictEqual((await provider(ctx.msgr_a_business, (p) => p.revoke(ctx.msgr_a_business, "1", "m"))).code, "not_supported")
    await providerOk(ctx.msgr_c_business, (p) => p.revoke(ctx.msgr_c_business, "1", "m"))
    await providerOk(ctx.msgr_c_business, (p) => p.like(ctx.msgr_c_business, "post-1", "comment-1"))
    assert.strictEqual((await provider(ctx.msgr_a, (p) => p.like(ctx.msgr_a, "t", "m"))).code, "not_supported")
    assert.strictEqual((await provider(ctx.msgr_c_business, (p) => p.edit(ctx.msgr_c_business, "1", "m", "x"))).code, "not_supported")
    await providerOk(ctx.msgr_a, (p) => p.block(ctx.msgr_a, "1"))
    // The business API's 24-hour window: nobody wrote, so free text and blocks are refused, templates pass.
    const business = ctx.msgr_a_business
    const closed = await provider(business, (p) => p.send(business, { recipient: "15550001", text: "hi", attachments: [], quotedExternalMessageId: null }))
    assert.strictEqual(closed.code, "not_reachable_24h")
    assert.strictEqual((await provider(business, (p) => p.block(business, "15550001"))).code, "not_reachable_24h")
    await providerOk(business, (p) =>
      p.send(business, { recipient: "15550001", text: null, attachments: [], quotedExternalMessageId: null, template: { name: "t", language: "en", header: [], body: [] } }))
    // Once the user writes in, the window is open.
    const inbound = await request(server, "POST", `/v1/channels/${business.id}/sandbox/inbound`, {
      token: company.token,
      body: { from: { external_id: "15550001", phone: "+15550001" }, text: "hello" }
    })
    assert.strictEqual(inbound.status, 201, JSON.stringify(inbound.body))
    await providerOk(business, (p) => p.send(business, { recipient: "15550001", text: "hi", attachments: [], quotedExternalMessageId: null }))
    await providerOk(business, (p) => p.block(business, "15550001"))
    const media = await providerOk(ctx.msgr_b, (p) => p.download(ctx.msgr_b, "data:text/plain;base64,aGVsbG8="))
    assert.deepStrictEqual([Buffer.from(media.bytes).toString(), media.mimeType], ["hello", "text/plain"])
  })
})

describe("sandbox endpoints", () => {
  it("injects inbound messages and statuses into the conversation model", async () => {
    const company = await createCompany(server)
    const channel = await create(company.token, { type: "msgr_a", provider: "sandbox", name: "S" })
    const res = await request(server, "POST", `/v1/channels/${channel.id}/sandbox/inbound`, {
      token: company.token,
      body: {
        from: { external_id: "u-100", username: "ann", name: "Ann Lee", phone: "+15551230000" },
        text: "Saw your ad",
        external_message_id: "ext-1",
        referral: { source_type: "ad", source_id: "AD-9", headline: "Sale", ctwa_clid: "c1" }
      }
    })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.deepStrictEqual(Object.keys(res.body.data).sort(), ["conversation_id", "duplicate", "message_id"])
    assert.strictEqual(res.body.data.duplicate, false)
    const [message] = await query<{ company_id: number; conversation_id: number; channel_id: number; direction: string; message_content: string; external_message_id: string; referral: any }>(
      server,
      "SELECT company_id, conversation_id, channel_id, direction, message_content, external_message_id, referral FROM messages WHERE id = $1",
      [res.body.data.message_id]
    )
    assert.strictEqual(message.company_id, company.id)
    assert.strictEqual(message.conversation_id, res.body.data.conversation_id)
    assert.strictEqual(message.channel_id, channel.id)
    assert.strictEqual(message.direction, "inbound")
    assert.strictEqual(message.message_content, "Saw your ad")
    assert.strictEqual(message.external_message_id, "ext-1")
    assert.strictEqual(message.referral.source_id, "AD-9")

    const again = await request(server, "POST", `/v1/channels/${channel.id}/sandbox/inbound`, {
      token: company.token,
      body: { from: { external_id: "u-100" }, text: "Saw your ad", external_message_id: "ext-1" }
    })
    assert.strictEqual(again.status, 201)
    assert.deepStrictEqual(again.body.data, { ...res.body.data, duplicate: true })

    const status = await request(server, "POST", `/v1/channels/${channel.id}/sandbox/status`, {
      token: company.token,
      body: { external_message_id: "ext-1", status: "read" }
    })
    assert.strictEqual(status.status, 200, JSON.stringify(status.body))
    assert.deepStrictEqual(status.body, { data: { message: "Status recorded." } })
  })

  it("validates input and refuses non-sandbox and invisible channels", async () => {
    const company = await createCompany(server)
    const channel = await create(company.token, { type: "msgr_b", provider: "sandbox", name: "S" })
    const bot = await create(company.token, { type: "msgr_b", provider: "telegram", name: "Bot", credentials: { bot_token: botToken } })
    const path = `/v1/channels/${channel.id}/sandbox/inbound`
    const missing = await request(server, "POST", path, { token: company.token, body: { text: "hi" } })
    assert.strictEqual(missing.status, 422)
    assert.ok(missing.body.errors.from)
    const blank = await request(server, "POST", path, { token: company.token, body: { from: { external_id: " " } } })
    assert.deepStrictEqual(blank.body.errors, { "from.external_id": ["The from.external_id field is required."] })
    const referral = await request(server, "POST", path, { token: company.token, body: { from: { external_id: "1" }, referral: { source_type: "ad" } } })
    assert.strictEqual(referral.status, 422)
    assert.ok(referral.body.errors.referral)
    const badStatus = await request(server, "POST", `/v1/channels/${channel.id}/sandbox/status`, {
      token: company.token,
      body: { external_message_id: "x", status: "seen" }
    })
    assert.strictEqual(badStatus.status, 422)
    assert.ok(badStatus.body.errors.status)
    const real = await request(server, "POST", `/v1/channels/${bot.id}/sandbox/inbound`, { token: company.token, body: { from: { external_id: "1" }, text: "x" } })
    assert.strictEqual(real.status, 422)
    assert.strictEqual(real.body.error_code, "channel_not_sandbox")
    assert.strictEqual((await query(server, "SELECT id FROM messages WHERE company_id = $1", [company.id])).length, 0)

    const agent = await addUser(server, company.id, { role: "agent" })
    const agentToken = await login(agent.email)
    const hidden = await request(server, "POST", path, { token: agentToken, body: { from: { external_id: "1" }, text: "x" } })
    assert.strictEqual(hidden.status, 404)
    const [team] = await query<{ id: number }>(server, "INSERT INTO teams (company_id, name) VALUES ($1, 'T') RETURNING id", [company.id])
    await query(server, "INSERT INTO team_members (company_id, team_id, user_id) VALUES ($1, $2, $3)", [company.id, team.id, agent.id])
    await query(server, "INSERT INTO team_channels (company_id, team_id, channel_id) VALUES ($1, $2, $3)", [company.id, team.id, channel.id])
    const visible = await request(server, "POST", path, { token: agentToken, body: { from: { external_id: "1" }, text: "x" } })
    assert.strictEqual(visible.status, 201, JSON.stringify(visible.body))
    const noAuth = await request(server, "POST", path, { body: { from: { external_id: "1" }, text: "x" } })
    assert.strictEqual(noAuth.status, 401)
  })
})

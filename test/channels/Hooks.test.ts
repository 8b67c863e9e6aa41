import { assert, describe, it } from "@effect/vitest"
import { createHmac } from "node:crypto"
import { afterAll, beforeAll } from "vitest"
import { WhatsAppFake } from "../fakes/WhatsAppFake.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const botToken = "700200:AAhooksTestBotTokenValue_456789"
const wa = { access_token: "EAAhooks", phone_number_id: "5550001", app_secret: "hooks-app-secret", verify_token: "hooks-verify" }

const setup = async () => {
  const company = await createCompany(server)
  const make = async (body: Record<string, unknown>) => {
    const res = await request(server, "POST", "/v1/channels", { token: company.token, body })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    return res.body.data.id as number
  }
  const telegram = await make({ type: "msgr_b", provider: "telegram", name: "Bot", credentials: { bot_token: botToken } })
  const whatsapp = await make({ type: "msgr_a_business", provider: "whatsapp_cloud", name: "WA", credentials: wa })
  const [row] = await query<{ webhook_secret: string }>(server, "SELECT webhook_secret FROM channels WHERE id = $1", [telegram])
  return { company, telegram, whatsapp, secret: row.webhook_secret }
}

const messagesOf = (channelId: number) =>
  query<{ id: number; message_content: string | null; message_type: string; external_message_id: string; referral: any; status: string | null; direction: string }>(
    server,
    "SELECT id, message_content, message_type, external_message_id, referral, status, direction FROM messages WHERE channel_id = $1 ORDER BY id",
    [channelId]
  )

const post = (path: string, raw: string, headers: Record<string, string> = {}) => request(server, "POST", path, { raw, headers })

const tgUpdate = (updateId: number, message: Record<string, unknown>) =>
  JSON.stringify({
    update_id: updateId,
    message: { message_id: updateId, from: { id: 9001, is_bot: false, first_name: "Tom", username: "tom" }, chat: { id: 9001, type: "private" }, date: 1_700_000_000, ...message }
  })

const waPayload = (phoneNumberId: string, value: Record<string, unknown>) => ({
  object: "whatsapp_business_account",
  entry: [{ id: "WABA-1", changes: [{ field: "messages", value: { messaging_product: "whatsapp", metadata: { display_phone_number: "15550001", phone_number_id: phoneNumberId }, ...value } }] }]
})

describe("Telegram webhook", () => {
  it("accepts an update with the channel's secret token and ingests it", async () => {
    const { telegram, secret, company } = await setup()
    const res = await post(`/hooks/telegram/${telegram}`, tgUpdate(1, { text: "Hello bot" }), { "x-telegram-bot-api-secret-token": secret })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.deepStrictEqual(res.body, { ok: true })
    const photo = await post(`/hooks/telegram/${telegram}`, tgUpdate(2, { caption: "pic", photo: [{ file_id: "small" }, { file_id: "big" }] }), {
      "x-telegram-bot-api-secret-token": secret
    })
    assert.strictEqual(photo.status, 200)
    const rows = await messagesOf(telegram)
    assert.deepStrictEqual(rows.map((m) => [m.direction, m.message_content, m.external_message_id]), [
      ["inbound", "Hello bot", "9001:1"],
      ["inbound", "pic", "9001:2"]
    ])
    const [attachment] = await query<{ type: string; url: string | null; company_id: number }>(
      server,
      "SELECT type, url, company_id FROM attachments WHERE message_id = $1",
      [rows[1].id]
    )
    assert.strictEqual(attachment.type, "image")
    assert.strictEqual(attachment.company_id, company.id)
    const [account] = await query<{ external_id: string; username: string; channel_type: string }>(
      server,
      "SELECT external_id, username, channel_type FROM contact_accounts WHERE company_id = $1",
      [company.id]
    )
    assert.deepStrictEqual(account, { external_id: "9001", username: "tom", channel_type: "msgr_b" })
    // Telegram retries deliveries; the same update stores nothing new.
    await post(`/hooks/telegram/${telegram}`, tgUpdate(1, { text: "Hello bot" }), { "x-telegram-bot-api-secret-token": secret })
    assert.strictEqual((await messagesOf(telegram)).length, 2)
  })

  it("rejects a missing or wrong secret with 401 and stores nothing", async () => {
    const { telegram, secret } = await setup()
    const none = await post(`/hooks/telegram/${telegram}`, tgUpdate(1, { text: "x" }))
    assert.strictEqual(none.status, 401)
    assert.deepStrictEqual(none.body, { message: "Invalid webhook secret token." })
    const wrong = await post(`/hooks/telegram/${telegram}`, tgUpdate(1, { text: "x" }), { "x-telegram-bot-api-secret-token": secret.slice(0, -1) + "?" })
    assert.strictEqual(wrong.status, 401)
    const garbageUnsigned = await post(`/hooks/telegram/${telegram}`, "\u0000\u0001garbage")
    assert.strictEqual(garbageUnsigned.status, 401)
    assert.strictEqual((await messagesOf(telegram)).length, 0)
  })

  it("answers garbage with 400/422, ignores other update kinds, 404s unknown channels", async () => {
    const { telegram, whatsapp, secret } = await setup()
    const headers = { "x-telegram-bot-api-secret-token": secret }
    const notJson = await post(`/hooks/telegram/${telegram}`, "{not json", headers)
    assert.strictEqual(notJson.status, 400)
    assert.deepStrictEqual(notJson.body, { message: "The request body must be valid JSON." })
    const binary = await post(`/hooks/telegram/${telegram}`, "\xff\xfe\xfd", { ...headers, "content-type": "application/octet-stream" })
    assert.strictEqual(binary.status, 400)
    for (const body of ["[]", "null", "42", '{"message":{"text":"no update id"}}', '{"update_id":"x"}']) {
      const res = await post(`/hooks/telegram/${telegram}`, body, headers)
      assert.strictEqual(res.status, 422, body)
      assert.strictEqual(typeof res.body.message, "string")
    }
    const callback = await post(`/hooks/telegram/${telegram}`, JSON.stringify({ update_id: 5, callback_query: { id: "1" } }), headers)
    assert.strictEqual(callback.status, 200)
    assert.strictEqual((await messagesOf(telegram)).length, 0)
    assert.strictEqual((await post(`/hooks/telegram/999999999`, tgUpdate(1, { text: "x" }), headers)).status, 404)
    assert.strictEqual((await post(`/hooks/telegram/${whatsapp}`, tgUpdate(1, { text: "x" }), headers)).status, 404)
    assert.strictEqual((await post(`/hooks/telegram/not-a-number`, tgUpdate(1, { text: "x" }), headers)).status, 422)
    assert.strictEqual((await post(`/hooks/telegram/99999999999999999999999`, tgUpdate(1, { text: "x" }), headers)).status, 422)
  })

  it("keeps tenants apart: one channel's secret does not open another company's channel", async () => {
    const a = await setup()
    const b = await setup()
    const res = await post(`/hooks/telegram/${b.telegram}`, tgUpdate(1, { text: "x" }), { "x-telegram-bot-api-secret-token": a.secret })
    assert.strictEqual(res.status, 401)
    assert.strictEqual((await messagesOf(b.telegram)).length, 0)
    assert.strictEqual((await messagesOf(a.telegram)).length, 0)
  })

  it("answers 404 once the channel is deleted", async () => {
    const { company, telegram, secret } = await setup()
    await request(server, "DELETE", `/v1/channels/${telegram}`, { token: company.token })
    const res = await post(`/hooks/telegram/${telegram}`, tgUpdate(1, { text: "x" }), { "x-telegram-bot-api-secret-token": secret })
    assert.strictEqual(res.status, 404)
    assert.deepStrictEqual(res.body, { message: "Channel not found." })
  })
})

describe("WhatsApp webhook", () => {
  it("answers the verify challenge as text/plain only with the right token", async () => {
    const { whatsapp } = await setup()
    const ok = await fetch(`${server.url}/hooks/whatsapp/${whatsapp}?hub.mode=subscribe&hub.verify_token=${wa.verify_token}&hub.challenge=1158201444`)
    assert.strictEqual(ok.status, 200)
    assert.ok(ok.headers.get("content-type")?.startsWith("text/plain"))
    assert.strictEqual(await ok.text(), "1158201444")
    const wrong = await request(server, "GET", `/hooks/whatsapp/${whatsapp}?hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1`)
    assert.strictEqual(wrong.status, 403)
    assert.deepStrictEqual(wrong.body, { message: "Webhook verification failed." })
    assert.strictEqual((await request(server, "GET", `/hooks/whatsapp/${whatsapp}?hub.verify_token=${wa.verify_token}&hub.challenge=1`)).status, 403)
    assert.strictEqual((await request(server, "GET", `/hooks/whatsapp/${whatsapp}`)).status, 403)
    assert.strictEqual((await request(server, "GET", `/hooks/whatsapp/999999999?hub.mode=subscribe&hub.verify_token=x&hub.challenge=1`)).status, 404)
  })

  it("accepts a correctly signed notification and ingests messages and statuses", async () => {
    const { whatsapp, company } = await setup()
    const inbound = WhatsAppFake.signed(wa.app_secret, waPayload(wa.phone_number_id, {
      contacts: [{ profile: { name: "Maria" }, wa_id: "15557654321" }],
      messages: [{
        from: "15557654321",
        id: "wamid.IN1",
        timestamp: "1700000000",
        type: "text",
        text: { body: "Hi, I saw the ad" },
        referral: { source_url: "https://fb.me/x", source_id: "AD77", source_type: "ad", headline: "Spring sale", ctwa_clid: "CL1", media_type: "image" }
      }]
    }))
    const res = await post(`/hooks/whatsapp/${whatsapp}`, inbound.body, { "x-hub-signature-256": inbound.signature })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    const [message] = await messagesOf(whatsapp)
    assert.strictEqual(message.message_content, "Hi, I saw the ad")
    assert.strictEqual(message.external_message_id, "wamid.IN1")
    assert.strictEqual(message.referral.source_id, "AD77")
    const [account] = await query<{ phone: string; display_name: string }>(
      server,
      "SELECT phone, display_name FROM contact_accounts WHERE company_id = $1 AND external_id = '15557654321'",
      [company.id]
    )
    assert.strictEqual(account.phone, "+15557654321")

    // An outbound message in the same thread, then Meta reports it delivered.
    const [row] = await query<{ id: number }>(
      server,
      `INSERT INTO messages (company_id, conversation_id, thread_id, channel_id, direction, message_content, external_message_id, status)
       SELECT company_id, conversation_id, thread_id, channel_id, 'outbound', 'Reply', 'wamid.OUT1', 'sent' FROM messages WHERE id = $1
       RETURNING id`,
      [message.id]
    )
    const status = WhatsAppFake.signed(wa.app_secret, waPayload(wa.phone_number_id, {
      statuses: [{ id: "wamid.OUT1", status: "delivered", timestamp: "1700000100", recipient_id: "15557654321" }]
    }))
    const delivered = await post(`/hooks/whatsapp/${whatsapp}`, status.body, { "x-hub-signature-256": status.signature })
    assert.strictEqual(delivered.status, 200)
    const [outbound] = await query<{ status: string }>(server, "SELECT status FROM messages WHERE id = $1", [row.id])
    assert.strictEqual(outbound.status, "delivered")
  })

  it("rejects bad signatures with 401 and stores nothing; the signature covers the raw bytes", async () => {
    const { whatsapp } = await setup()
    const payload = waPayload(wa.phone_number_id, { messages: [{ from: "1555", id: "wamid.BAD", timestamp: "1", type: "text", text: { body: "x" } }] })
    const signed = WhatsAppFake.signed(wa.app_secret, payload)
    const reformatted = JSON.stringify(payload, null, 2)
    const cases: Array<[string, Record<string, string>]> = [
      [signed.body, {}],
      [signed.body, { "x-hub-signature-256": "sha256=" + "0".repeat(64) }],
      [signed.body, { "x-hub-signature-256": WhatsAppFake.signed("other-secret", payload).signature }],
      [reformatted, { "x-hub-signature-256": signed.signature }],
      [signed.body, { "x-hub-signature-256": "garbage" }]
    ]
    for (const [body, headers] of cases) {
      const res = await post(`/hooks/whatsapp/${whatsapp}`, body, headers)
      assert.strictEqual(res.status, 401, JSON.stringify(headers))
      assert.deepStrictEqual(res.body, { message: "Invalid webhook signature." })
    }
    assert.strictEqual((await messagesOf(whatsapp)).length, 0)
    // The same bytes with the right signature are fine.
    assert.strictEqual((await post(`/hooks/whatsapp/${whatsapp}`, signed.body, { "x-hub-signature-256": signed.signature })).status, 200)
    assert.strictEqual((await messagesOf(whatsapp)).length, 1)
  })

  it("answers signed garbage with 400/422 and skips other numbers and objects", async () => {
    const { whatsapp } = await setup()
    const send = (raw: string) =>
      post(`/hooks/whatsapp/${whatsapp}`, raw, { "x-hub-signature-256": `sha256=${createHmac("sha256", wa.app_secret).update(raw).digest("hex")}` })
    assert.strictEqual((await send("{broken")).status, 400)
    for (const body of ['{"object":"whatsapp_business_account"}', '{"entry":[]}', "[1,2]", '{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"messages":[{"id":1}]}}]}]}']) {
      const res = await send(body)
      assert.strictEqual(res.status, 422, body)
    }
    assert.strictEqual((await send(JSON.stringify({ object: "page", entry: [] }))).status, 200)
    const other = JSON.stringify(waPayload("999", { messages: [{ from: "1", id: "wamid.OTHER", timestamp: "1", type: "text", text: { body: "x" } }] }))
    assert.strictEqual((await send(other)).status, 200)
    assert.strictEqual((await messagesOf(whatsapp)).length, 0)
  })
})

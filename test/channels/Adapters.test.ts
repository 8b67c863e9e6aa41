import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { FetchHttpClient } from "effect/http"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll } from "vitest"
import { AppConfig } from "../../src/platform/Config.ts"
import type { ChannelContext, OutboundMessage, ProviderError, ProviderThrottled } from "../../src/providers/Provider.ts"
import { TelegramApi } from "../../src/providers/Telegram.ts"
import { WhatsAppCloudApi } from "../../src/providers/WhatsAppCloud.ts"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import { WhatsAppFake } from "../fakes/WhatsAppFake.ts"

const botToken = "123456:AAtestTokenForTheFakeBotApi_xyz"
const waToken = "EAAfaketoken"
const phoneNumberId = "1065403522"

const tg = new TelegramFake()
const wa = new WhatsAppFake()
let layer: Layer.Layer<TelegramApi | WhatsAppCloudApi, unknown>
const dir = mkdtempSync(join(tmpdir(), "crm-adapters-"))

beforeAll(async () => {
  await tg.http.start()
  await wa.http.start()
  tg.tokens.add(botToken)
  wa.tokens.add(waToken)
  layer = Layer.mergeAll(TelegramApi.layer, WhatsAppCloudApi.layer).pipe(
    Layer.provide(FetchHttpClient.layer),
    Layer.provide(AppConfig.layerWith({ telegramApiBase: tg.http.url, whatsappApiBase: wa.http.url, providerTimeoutMs: 400, storageDir: dir }))
  )
})
afterAll(async () => {
  await tg.http.close()
  await wa.http.close()
})

const run = <A, E>(effect: Effect.Effect<A, E, TelegramApi | WhatsAppCloudApi>) => Effect.runPromise(Effect.provide(effect, layer))
const failure = async <A>(effect: Effect.Effect<A, ProviderError | ProviderThrottled, TelegramApi | WhatsAppCloudApi>) => {
  const error = await run(Effect.flip(effect))
  if (error._tag !== "ProviderError") throw new Error(`expected a ProviderError, got ${error._tag}: ${error.message}`)
  return error
}
const throttle = async <A>(effect: Effect.Effect<A, ProviderError | ProviderThrottled, TelegramApi | WhatsAppCloudApi>) => {
  const error = await run(Effect.flip(effect))
  if (error._tag !== "ProviderThrottled") throw new Error(`expected a throttle answer, got ${error.code}: ${error.message}`)
  return error
}

const telegramChannel = (overrides: Partial<ChannelContext> = {}): ChannelContext => ({
  id: 1,
  companyId: 1,
  type: "msgr_b",
  provider: "telegram",
  status: "connected",
  credentials: { bot_token: botToken },
  settings: {},
  ...overrides
})
const whatsappChannel = (overrides: Partial<ChannelContext> = {}): ChannelContext => ({
  id: 2,
  companyId: 1,
  type: "msgr_a_business",
  provider: "whatsapp_cloud",
  status: "connected",
  credentials: { access_token: waToken, phone_number_id: phoneNumberId, app_secret: "s", verify_token: "v" },
  settings: {},
  ...overrides
})
const text = (recipient: string, body: string | null, extra: Partial<OutboundMessage> = {}): OutboundMessage => ({
  recipient,
  text: body,
  attachments: [],
  quotedExternalMessageId: null,
  ...extra
})

const telegram = TelegramApi.useSync((api) => api.adapter)
const whatsapp = WhatsAppCloudApi.useSync((api) => api.adapter)

describe("Telegram adapter against the Bot API fake", () => {
  it("sends text with sendMessage and returns <chat>:<message> ids", async () => {
    const sent = await run(Effect.flatMap(telegram, (a) => a.send(telegramChannel(), text("5550001", "Hello there"))))
    const call = tg.http.calls("sendMessage").at(-1)!
    assert.deepStrictEqual(call.body, { chat_id: "5550001", text: "Hello there" })
    assert.strictEqual(call.path, `/bot${botToken}/sendMessage`)
    assert.match(sent.externalMessageId, /^5550001:\d+$/)
    assert.strictEqual(sent.externalThreadId, null)
    assert.strictEqual(sent.status, "sent")
  })

  it("replies with reply_parameters and reports group chats as threads", async () => {
    const sent = await run(Effect.flatMap(telegram, (a) => a.send(telegramChannel(), text("-100777", "In the group", { quotedExternalMessageId: "-100777:55" }))))
    const call = tg.http.calls("sendMessage").at(-1)!
    assert.deepStrictEqual(call.body.reply_parameters, { message_id: 55, allow_sending_without_reply: true })
    assert.strictEqual(sent.externalThreadId, "-100777")
  })

  it("sends a photo by URL with the text as caption", async () => {
    await run(Effect.flatMap(telegram, (a) =>
      a.send(telegramChannel(), text("5550001", "Look", {
        attachments: [{ type: "image", mime_type: "image/jpeg", storage_path: null, url: "https://example.test/a.jpg", file_name: null }]
      }))))
    const call = tg.http.calls("sendPhoto").at(-1)!
    assert.deepStrictEqual(call.body, { chat_id: "5550001", photo: "https://example.test/a.jpg", caption: "Look" })
    assert.strictEqual(tg.http.calls("sendMessage").filter((c) => c.body.text === "Look").length, 0)
  })

  it("uploads a local photo as multipart/form-data", async () => {
    const bytes = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4])
    writeFileSync(join(dir, "pic.jpg"), bytes)
    const sent = await run(Effect.flatMap(telegram, (a) =>
      a.send(telegramChannel(), text("5550001", "Local", {
        attachments: [{ type: "image", mime_type: "image/jpeg", storage_path: "pic.jpg", url: null, file_name: "pic.jpg" }]
      }))))
    const call = tg.http.calls("sendPhoto").at(-1)!
    assert.ok(String(call.headers["content-type"]).startsWith("multipart/form-data"))
    assert.strictEqual(call.body.chat_id, "5550001")
    assert.strictEqual(call.body.caption, "Local")
    assert.strictEqual(call.files.photo.name, "pic.jpg")
    assert.deepStrictEqual([...call.files.photo.bytes], [...bytes])
    assert.match(sent.externalMessageId, /^5550001:\d+$/)
  })

  it("sends text separately when it is too long for a caption, and documents, voice and stickers with their methods", async () => {
    const long = "x".repeat(1500)
    const before = tg.http.calls("sendMessage").length
    await run(Effect.flatMap(telegram, (a) =>
      a.send(telegramChannel(), text("5550001", long, {
        attachments: [
          { type: "document", mime_type: "application/pdf", storage_path: null, url: "https://example.test/a.pdf", file_name: "a.pdf" },
          { type: "voice", mime_type: "audio/ogg", storage_path: null, url: "https://example.test/v.ogg", file_name: null },
          { type: "sticker", mime_type: "image/webp", storage_path: null, url: "https://example.test/s.webp", file_name: null }
        ]
      }))))
    assert.strictEqual(tg.http.calls("sendMessage").length, before + 1)
    assert.strictEqual(tg.http.calls("sendDocument").at(-1)!.body.document, "https://example.test/a.pdf")
    assert.strictEqual(tg.http.calls("sendVoice").at(-1)!.body.voice, "https://example.test/v.ogg")
    assert.strictEqual(tg.http.calls("sendSticker").at(-1)!.body.sticker, "https://example.test/s.webp")
    assert.strictEqual(tg.http.calls("sendDocument").at(-1)!.body.caption, undefined)
  })

  it("edits, reacts to and deletes a sent message", async () => {
    const sent = await run(Effect.flatMap(telegram, (a) => a.send(telegramChannel(), text("5550002", "first"))))
    const messageId = Number(sent.externalMessageId.split(":")[1])
    await run(Effect.flatMap(telegram, (a) => a.edit(telegramChannel(), "5550002", sent.externalMessageId, "second")))
    assert.deepStrictEqual(tg.http.calls("editMessageText").at(-1)!.body, { chat_id: "5550002", message_id: messageId, text: "second" })
    // The same text again is "not modified" on Telegram's side, not a failure for us.
    await run(Effect.flatMap(telegram, (a) => a.edit(telegramChannel(), "5550002", sent.externalMessageId, "second")))
    await run(Effect.flatMap(telegram, (a) => a.react(telegramChannel(), "5550002", sent.externalMessageId, "👍")))
    assert.deepStrictEqual(tg.http.calls("setMessageReaction").at(-1)!.body.reaction, [{ type: "emoji", emoji: "👍" }])
    await run(Effect.flatMap(telegram, (a) => a.react(telegramChannel(), "5550002", sent.externalMessageId, null)))
    assert.deepStrictEqual(tg.http.calls("setMessageReaction").at(-1)!.body.reaction, [])
    await run(Effect.flatMap(telegram, (a) => a.revoke(telegramChannel(), "5550002", sent.externalMessageId)))
    assert.deepStrictEqual(tg.http.calls("deleteMessage").at(-1)!.body, { chat_id: "5550002", message_id: messageId })
    const again = await failure(Effect.flatMap(telegram, (a) => a.revoke(telegramChannel(), "5550002", sent.externalMessageId)))
    assert.strictEqual(again.code, "rejected")
    assert.strictEqual(again.message, "Bad Request: message to delete not found")
    const missing = await failure(Effect.flatMap(telegram, (a) => a.edit(telegramChannel(), "5550002", "5550002:999999", "x")))
    assert.strictEqual(missing.code, "rejected")
    assert.strictEqual(missing.message, "Bad Request: message to edit not found")
  })

  it("downloads a file through getFile and the file endpoint", async () => {
    const bytes = new Uint8Array([1, 2, 3, 4, 5, 6])
    tg.files.set("FILE-ABC", { path: "photos/file_7.jpg", bytes, contentType: "application/octet-stream" })
    const file = await run(Effect.flatMap(telegram, (a) => a.download(telegramChannel(), "FILE-ABC")))
    assert.deepStrictEqual([...file.bytes], [...bytes])
    assert.strictEqual(file.mimeType, "image/jpeg")
    assert.deepStrictEqual(tg.http.calls("getFile").at(-1)!.body, { file_id: "FILE-ABC" })
    const unknown = await failure(Effect.flatMap(telegram, (a) => a.download(telegramChannel(), "NOPE")))
    assert.strictEqual(unknown.code, "rejected")
  })

  it("maps failures: bad token rejected, 5xx unavailable, 429 a throttle with its retry_after, timeouts and refused connections unavailable", async () => {
    const badToken = await failure(Effect.flatMap(telegram, (a) =>
      a.send(telegramChannel({ credentials: { bot_token: "999:AAnotAValidTokenAtAllForFake" } }), text("1", "x"))))
    assert.strictEqual(badToken.code, "rejected")
    assert.strictEqual(badToken.message, "Unauthorized")
    tg.http.inject("sendMessage", { status: 502, body: "<html>bad gateway</html>", contentType: "text/html" })
    assert.strictEqual((await failure(Effect.flatMap(telegram, (a) => a.send(telegramChannel(), text("1", "x"))))).code, "unavailable")
    tg.http.inject("sendMessage", { status: 429, body: { ok: false, error_code: 429, description: "Too Many Requests: retry after 5", parameters: { retry_after: 5 } } })
    const limited = await throttle(Effect.flatMap(telegram, (a) => a.send(telegramChannel(), text("1", "x"))))
    assert.deepStrictEqual([limited.scope, limited.retryAfterMs, limited.message], ["channel", 5000, "Too Many Requests: retry after 5"])
    tg.http.inject("sendMessage", { status: 403, body: { ok: false, error_code: 403, description: "Forbidden: bot was blocked by the user" } })
    const blocked = await failure(Effect.flatMap(telegram, (a) => a.send(telegramChannel(), text("1", "x"))))
    assert.deepStrictEqual([blocked.code, blocked.message], ["rejected", "Forbidden: bot was blocked by the user"])
    tg.http.inject("sendMessage", "hang")
    const slow = await failure(Effect.flatMap(telegram, (a) => a.send(telegramChannel(), text("1", "x"))))
    assert.strictEqual(slow.code, "unavailable")
    assert.match(slow.message, /did not answer/)
    const nowhere = Layer.mergeAll(TelegramApi.layer).pipe(
      Layer.provide(FetchHttpClient.layer),
      Layer.provide(AppConfig.layerWith({ telegramApiBase: "http://127.0.0.1:1", providerTimeoutMs: 2000 }))
    )
    const refused = await Effect.runPromise(Effect.flip(Effect.flatMap(telegram, (a) => a.send(telegramChannel(), text("1", "x")))).pipe(Effect.provide(nowhere)))
    assert.deepStrictEqual([refused._tag, refused._tag === "ProviderError" ? refused.code : null], ["ProviderError", "unavailable"])
    assert.ok(!refused.message.includes(botToken))
  })

  it("refuses what bots cannot do and empty sends", async () => {
    assert.strictEqual((await failure(Effect.flatMap(telegram, (a) => a.block(telegramChannel(), "1")))).code, "not_supported")
    assert.strictEqual((await failure(Effect.flatMap(telegram, (a) => a.like(telegramChannel(), "1", "1:1")))).code, "not_supported")
    const template = text("1", null, { template: { name: "hello", language: "en", header: [], body: [] } })
    assert.strictEqual((await failure(Effect.flatMap(telegram, (a) => a.send(telegramChannel(), template)))).code, "not_supported")
    assert.strictEqual((await failure(Effect.flatMap(telegram, (a) => a.send(telegramChannel(), text("1", "  "))))).code, "rejected")
    const noToken = await failure(Effect.flatMap(telegram, (a) => a.send(telegramChannel({ credentials: {} }), text("1", "x"))))
    assert.strictEqual(noToken.code, "rejected")
  })

  it("registers the webhook with the secret token after checking the bot", async () => {
    const bot = await run(TelegramApi.use((api) =>
      api.registerWebhook(telegramChannel(), "https://crm.example/hooks/telegram/1", "secretSECRET123")))
    assert.deepStrictEqual(bot, { username: "fake_crm_bot" })
    assert.deepStrictEqual(tg.webhooks.get(botToken), { url: "https://crm.example/hooks/telegram/1", secret_token: "secretSECRET123" })
    assert.deepStrictEqual(tg.http.calls("setWebhook").at(-1)!.body.allowed_updates, ["message", "edited_message"])
  })
})

describe("WhatsApp Cloud adapter against the Cloud API fake", () => {
  it("sends text with the bearer token to /{phone_number_id}/messages", async () => {
    const sent = await run(Effect.flatMap(whatsapp, (a) => a.send(whatsappChannel(), text("15551234567", "Hi from the shop"))))
    const call = wa.http.calls("POST messages").at(-1)!
    assert.strictEqual(call.path, `/${phoneNumberId}/messages`)
    assert.strictEqual(call.headers.authorization, `Bearer ${waToken}`)
    assert.deepStrictEqual(call.body, {
      messaging_product: "whatsapp",
      recipient_type: "individual",
      to: "15551234567",
      type: "text",
      text: { body: "Hi from the shop", preview_url: false }
    })
    assert.match(sent.externalMessageId, /^wamid\./)
  })

  it("quotes with context, sends media by link with a caption, and uploads local files first", async () => {
    await run(Effect.flatMap(whatsapp, (a) =>
      a.send(whatsappChannel(), text("15551234567", "See this", {
        quotedExternalMessageId: "wamid.ORIGINAL",
        attachments: [{ type: "image", mime_type: "image/png", storage_path: null, url: "https://example.test/p.png", file_name: null }]
      }))))
    const image = wa.http.calls("POST messages").at(-1)!
    assert.deepStrictEqual(image.body.context, { message_id: "wamid.ORIGINAL" })
    assert.strictEqual(image.body.type, "image")
    assert.deepStrictEqual(image.body.image, { link: "https://example.test/p.png", caption: "See this" })

    const bytes = new Uint8Array([37, 80, 68, 70, 45])
    writeFileSync(join(dir, "doc.pdf"), bytes)
    await run(Effect.flatMap(whatsapp, (a) =>
      a.send(whatsappChannel(), text("15551234567", null, {
        attachments: [{ type: "document", mime_type: "application/pdf", storage_path: join(dir, "doc.pdf"), url: null, file_name: "doc.pdf" }]
      }))))
    const upload = wa.http.calls("POST media").at(-1)!
    assert.strictEqual(upload.body.messaging_product, "whatsapp")
    assert.strictEqual(upload.body.type, "application/pdf")
    assert.deepStrictEqual([...upload.files.file.bytes], [...bytes])
    const doc = wa.http.calls("POST messages").at(-1)!
    assert.strictEqual(doc.body.type, "document")
    assert.match(String((doc.body.document as any).id), /^media\d+$/)
    assert.strictEqual((doc.body.document as any).filename, "doc.pdf")
  })

  it("sends reactions and templates", async () => {
    await run(Effect.flatMap(whatsapp, (a) => a.react(whatsappChannel(), "15551234567", "wamid.X", "❤️")))
    assert.deepStrictEqual(wa.http.calls("POST messages").at(-1)!.body.reaction, { message_id: "wamid.X", emoji: "❤️" })
    await run(Effect.flatMap(whatsapp, (a) => a.react(whatsappChannel(), "15551234567", "wamid.X", null)))
    assert.deepStrictEqual(wa.http.calls("POST messages").at(-1)!.body.reaction, { message_id: "wamid.X", emoji: "" })
    await run(Effect.flatMap(whatsapp, (a) =>
      a.send(whatsappChannel(), text("15551234567", null, { template: { name: "order_update", language: "en_US", header: [], body: [{ name: "order_id", value: "42" }] } }))))
    assert.deepStrictEqual(wa.http.calls("POST messages").at(-1)!.body.template, {
      name: "order_update",
      language: { code: "en_US" },
      components: [{ type: "body", parameters: [{ type: "text", parameter_name: "order_id", text: "42" }] }]
    })
  })

  it("downloads media: GET /{media-id} then the URL with the same bearer token", async () => {
    wa.media.set("778899", { bytes: new Uint8Array([9, 8, 7]), mimeType: "image/jpeg" })
    const media = await run(Effect.flatMap(whatsapp, (a) => a.download(whatsappChannel(), "778899")))
    assert.deepStrictEqual([...media.bytes], [9, 8, 7])
    assert.strictEqual(media.mimeType, "image/jpeg")
    assert.strictEqual(wa.http.calls("download").at(-1)!.headers.authorization, `Bearer ${waToken}`)
    assert.strictEqual((await failure(Effect.flatMap(whatsapp, (a) => a.download(whatsappChannel(), "404404")))).code, "rejected")
  })

  it("blocks and unblocks users; a user outside the 24-hour window is not_reachable_24h", async () => {
    await run(Effect.flatMap(whatsapp, (a) => a.block(whatsappChannel(), "15550000001")))
    assert.ok(wa.blocked.has("15550000001"))
    assert.deepStrictEqual(wa.http.calls("POST block_users").at(-1)!.body, { messaging_product: "whatsapp", block_users: [{ user: "15550000001" }] })
    await run(Effect.flatMap(whatsapp, (a) => a.unblock(whatsappChannel(), "15550000001")))
    assert.ok(!wa.blocked.has("15550000001"))
    wa.closedWindow.add("15550000002")
    const closed = await failure(Effect.flatMap(whatsapp, (a) => a.block(whatsappChannel(), "15550000002")))
    assert.strictEqual(closed.code, "not_reachable_24h")
  })

  it("maps failures and refuses edit and revoke", async () => {
    const bad = await failure(Effect.flatMap(whatsapp, (a) =>
      a.send(whatsappChannel({ credentials: { access_token: "wrong", phone_number_id: phoneNumberId } }), text("1", "x"))))
    assert.strictEqual(bad.code, "rejected")
    assert.match(bad.message, /Invalid OAuth access token/)
    wa.http.inject("POST messages", {
      status: 400,
      body: { error: { message: "(#131047) Re-engagement message", type: "OAuthException", code: 131047, error_data: { messaging_product: "whatsapp", details: "More than 24 hours have passed." } } }
    })
    const window = await failure(Effect.flatMap(whatsapp, (a) => a.send(whatsappChannel(), text("1", "x"))))
    assert.deepStrictEqual([window.code, window.message], ["not_reachable_24h", "More than 24 hours have passed."])
    const waError = (code: number, message: string) => ({ status: 400, body: { error: { message, type: "OAuthException", code, fbtrace_id: "A" } } })
    wa.http.inject("POST messages", waError(130429, "(#130429) Rate limit hit"))
    const throughput = await throttle(Effect.flatMap(whatsapp, (a) => a.send(whatsappChannel(), text("1", "x"))))
    assert.deepStrictEqual([throughput.scope, throughput.retryAfterMs], ["channel", 1000])
    wa.http.inject("POST messages", waError(131056, "(#131056) (Business Account, Consumer Account) pair rate limit hit"))
    const pair = await throttle(Effect.flatMap(whatsapp, (a) => a.send(whatsappChannel(), text("1", "x"))))
    assert.deepStrictEqual([pair.scope, pair.retryAfterMs], ["pair", 6000])
    wa.http.inject("POST messages", waError(80007, "(#80007) Rate limit issues"))
    assert.strictEqual((await throttle(Effect.flatMap(whatsapp, (a) => a.send(whatsappChannel(), text("1", "x"))))).retryAfterMs, 60_000)
    // Outside sending a throttle answer stays a plain `unavailable`.
    wa.http.inject("POST messages", waError(130429, "(#130429) Rate limit hit"))
    assert.strictEqual((await failure(Effect.flatMap(whatsapp, (a) => a.react(whatsappChannel(), "1", "wamid.1", "👍")))).code, "unavailable")
    wa.http.inject("POST messages", { status: 503, body: "unavailable", contentType: "text/plain" })
    assert.strictEqual((await failure(Effect.flatMap(whatsapp, (a) => a.send(whatsappChannel(), text("1", "x"))))).code, "unavailable")
    wa.http.inject("POST messages", "hang")
    assert.strictEqual((await failure(Effect.flatMap(whatsapp, (a) => a.send(whatsappChannel(), text("1", "x"))))).code, "unavailable")
    assert.strictEqual((await failure(Effect.flatMap(whatsapp, (a) => a.edit(whatsappChannel(), "1", "wamid.1", "x")))).code, "not_supported")
    assert.strictEqual((await failure(Effect.flatMap(whatsapp, (a) => a.revoke(whatsappChannel(), "1", "wamid.1")))).code, "not_supported")
  })
})

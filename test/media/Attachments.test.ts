import { assert, describe, it } from "@effect/vitest"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import { conversationOn, send } from "../messages/support.ts"
import { fileServer } from "../support/FileServer.ts"
import { jpeg, png, webp } from "../support/Images.ts"
import { payloadsOf, query } from "../support/Sql.ts"
import { createCompany, getLink, request, upload } from "../support/TestServer.ts"
import { tempDir, tone } from "./support.ts"

const botToken = "700300:AAmediaTestBotTokenValue_123456"
const tg = new TelegramFake()
tg.tokens.add(botToken)
const server = fileServer(() => ({ storageDir: tempDir(), telegramApiBase: tg.http.url, appUrl: "https://crm.example.test" }), [tg.http])

const uploadPng = async (token: string, name = "pic.png") => {
  const bytes = await png(300, 200)
  const res = await upload(server, token, "/v1/uploads", { bytes, name, type: "image/png" })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return { id: res.body.media_id as number, bytes }
}

/** A sticker of the company's library, through the sticker endpoints. */
const sticker = async (token: string) => {
  const pack = await request(server, "POST", "/v1/sticker-packs", { token, body: { name: "Pack", tray_emoji: "🙂" } })
  assert.strictEqual(pack.status, 201, JSON.stringify(pack.body))
  const file = { bytes: await webp(600, 600), name: "s.webp", type: "image/webp", field: "files[]" }
  const res = await upload(server, token, `/v1/sticker-packs/${pack.body.data.pack.id}/stickers`, file)
  assert.ok(res.status === 200 || res.status === 201, JSON.stringify(res.body))
  return res.body.data.created[0].id as number
}

describe("attachments on send and direct create", () => {
  it("sends an uploaded image: the attachment row carries the media, a signed url and a 640 thumbnail", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const media = await uploadPng(a.token)
    const res = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "look", attachments: [{ media_id: media.id }] })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    const m = res.body.data
    assert.strictEqual(m.message_type, "image")
    assert.strictEqual(m.message_content, "look")
    assert.strictEqual(m.attachments.length, 1)
    const att = m.attachments[0]
    assert.strictEqual(att.type, "image")
    assert.strictEqual(att.media_id, media.id)
    assert.strictEqual(att.sticker_id, null)
    assert.strictEqual(att.mime_type, "image/png")
    assert.strictEqual(att.file_name, "pic.png")
    assert.strictEqual(att.size, media.bytes.byteLength)
    assert.match(att.url, new RegExp(`^https://crm\\.example\\.test/v1/messages/${m.id}/attachments/${att.id}/media\\?c=${a.id}&signature=`))
    assert.match(att.thumbnail_url, /[?&]w=640(&|$)/)
    const original = await getLink(server, att.url)
    assert.strictEqual(original.status, 200)
    assert.deepStrictEqual(original.bytes, media.bytes)
    // The event carries the same attachment.
    const created = (await payloadsOf(server, a.id, "message.created")).find((p) => p.message.id === m.id)
    assert.strictEqual(created.message.attachments[0].url, att.url)
    // And a later read renders it the same way.
    const again = await request(server, "GET", `/v1/messages/${m.id}`, { token: a.token })
    assert.deepStrictEqual(again.body.data.attachments, m.attachments)
  })

  it("takes sticker_id on send and direct create (type sticker), and voice notes as voice messages", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const stickerId = await sticker(a.token)
    const viaSend = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, sticker_id: stickerId })
    assert.strictEqual(viaSend.status, 201, JSON.stringify(viaSend.body))
    assert.strictEqual(viaSend.body.data.message_type, "sticker")
    assert.strictEqual(viaSend.body.data.attachments[0].type, "sticker")
    assert.strictEqual(viaSend.body.data.attachments[0].sticker_id, stickerId)
    assert.strictEqual(viaSend.body.data.attachments[0].mime_type, "image/webp")
    const file = await getLink(server, viaSend.body.data.attachments[0].url)
    assert.strictEqual(file.status, 200)
    assert.strictEqual(Buffer.from(file.bytes.subarray(8, 12)).toString(), "WEBP")

    const row = await request(server, "POST", "/v1/messages", {
      token: a.token,
      body: { thread_id: c.threadId, attachments: [{ sticker_id: stickerId, type: "image" }] }
    })
    assert.strictEqual(row.status, 201, JSON.stringify(row.body))
    assert.strictEqual(row.body.data.attachments[0].type, "sticker", "a sticker row is a sticker whatever type it claims")

    const note = await upload(server, a.token, "/v1/uploads/voice", { bytes: tone("wav"), name: "n.wav", type: "audio/wav" })
    const voice = await request(server, "POST", "/v1/messages", { token: a.token, body: { thread_id: c.threadId, attachments: [{ media_id: note.body.media_id }] } })
    assert.strictEqual(voice.status, 201, JSON.stringify(voice.body))
    assert.strictEqual(voice.body.data.message_type, "voice")
    assert.strictEqual(voice.body.data.attachments[0].mime_type, "audio/ogg")
    assert.strictEqual(voice.body.data.attachments[0].thumbnail_url, null, "no thumbnail for audio")
  })

  it("needs exactly one source per row, and the company's own sources (422 attachment_source_invalid)", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const own = await uploadPng(a.token)
    const foreign = await uploadPng(b.token)
    const foreignSticker = await sticker(b.token)
    const base = { channel_id: c.channelId, thread_id: c.threadId }

    const both = await send(server, a.token, { ...base, attachments: [{ media_id: own.id, sticker_id: 1 }] })
    assert.strictEqual(both.status, 422)
    assert.ok(both.body.errors["attachments.0"], JSON.stringify(both.body))
    const neither = await send(server, a.token, { ...base, text: "x", attachments: [{ file_name: "a.png" }] })
    assert.strictEqual(neither.status, 422)
    assert.ok(neither.body.errors["attachments.0"], JSON.stringify(neither.body))

    for (const body of [
      { ...base, attachments: [{ media_id: foreign.id }] },
      { ...base, attachments: [{ media_id: own.id }, { media_id: 987654321 }] },
      { ...base, sticker_id: foreignSticker },
      { ...base, attachments: [{ sticker_id: 987654321 }] }
    ]) {
      const res = await send(server, a.token, body)
      assert.strictEqual(res.status, 422, JSON.stringify(body))
      assert.strictEqual(res.body.error_code, "attachment_source_invalid")
    }
    const direct = await request(server, "POST", "/v1/messages", { token: a.token, body: { thread_id: c.threadId, attachments: [{ media_id: foreign.id }] } })
    assert.strictEqual(direct.status, 422)
    assert.strictEqual(direct.body.error_code, "attachment_source_invalid")

    const wrongType = await send(server, a.token, { ...base, attachments: [{ media_id: own.id, type: "voice" }] })
    assert.strictEqual(wrongType.status, 422)
    assert.ok(wrongType.body.errors["attachments.0.type"], JSON.stringify(wrongType.body))
    const asDocument = await send(server, a.token, { ...base, attachments: [{ media_id: own.id, type: "document", file_name: "scan.png" }] })
    assert.strictEqual(asDocument.status, 201, JSON.stringify(asDocument.body))
    assert.strictEqual(asDocument.body.data.attachments[0].type, "document")
    assert.strictEqual(asDocument.body.data.attachments[0].file_name, "scan.png")
  })

  it("refuses a sticker on the social inbox, which cannot carry one", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token, "msgr_c_business")
    const res = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, sticker_id: await sticker(a.token) })
    assert.strictEqual(res.status, 422)
    assert.strictEqual(res.body.error_code, "content_type_unsupported")
  })
})

describe("GET / POST /v1/messages/{id}/attachments", () => {
  it("lists a message's attachments and records another upload on it, with message.updated", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const first = await uploadPng(a.token)
    const sent = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, attachments: [{ media_id: first.id }] })
    const id = sent.body.data.id
    const second = await upload(server, a.token, "/v1/uploads", { bytes: await jpeg(30, 30), name: "two.jpg", type: "image/jpeg" })
    const added = await request(server, "POST", `/v1/messages/${id}/attachments`, { token: a.token, body: { media_id: second.body.media_id } })
    assert.strictEqual(added.status, 201, JSON.stringify(added.body))
    assert.strictEqual(added.body.data.media_id, second.body.media_id)
    assert.strictEqual(added.body.data.mime_type, "image/jpeg")
    const list = await request(server, "GET", `/v1/messages/${id}/attachments`, { token: a.token })
    assert.strictEqual(list.status, 200)
    assert.deepStrictEqual(list.body.data.map((x: any) => x.media_id), [first.id, second.body.media_id])
    const updated = (await payloadsOf(server, a.id, "message.updated")).filter((p) => p.message.id === id)
    assert.deepStrictEqual(updated.map((p) => p.change), ["attachments"])
    assert.strictEqual(updated[0].message.attachments.length, 2)

    const bad = await request(server, "POST", `/v1/messages/${id}/attachments`, { token: a.token, body: { media_id: 987654321 } })
    assert.strictEqual(bad.status, 422)
    assert.strictEqual(bad.body.error_code, "attachment_source_invalid")
    const neither = await request(server, "POST", `/v1/messages/${id}/attachments`, { token: a.token, body: {} })
    assert.strictEqual(neither.status, 422)
  })

  it("answers 404 for another company's message", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const mine = await uploadPng(b.token)
    const list = await request(server, "GET", `/v1/messages/${c.inboundId}/attachments`, { token: b.token })
    assert.strictEqual(list.status, 404)
    const add = await request(server, "POST", `/v1/messages/${c.inboundId}/attachments`, { token: b.token, body: { media_id: mine.id } })
    assert.strictEqual(add.status, 404)
    const [{ n }] = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM attachments WHERE message_id = $1", [c.inboundId])
    assert.strictEqual(n, 0)
  })
})

describe("media through the Telegram adapter", () => {
  const setup = async () => {
    const company = await createCompany(server)
    const ch = await request(server, "POST", "/v1/channels", {
      token: company.token,
      body: { type: "msgr_b", provider: "telegram", name: "Bot", credentials: { bot_token: botToken } }
    })
    assert.strictEqual(ch.status, 201, JSON.stringify(ch.body))
    const [{ webhook_secret }] = await query<{ webhook_secret: string }>(server, "SELECT webhook_secret FROM channels WHERE id = $1", [ch.body.data.id])
    const hook = (updateId: number, message: Record<string, unknown>) =>
      request(server, "POST", `/hooks/telegram/${ch.body.data.id}`, {
        headers: { "x-telegram-bot-api-secret-token": webhook_secret },
        raw: JSON.stringify({
          update_id: updateId,
          message: { message_id: updateId, from: { id: 7001, is_bot: false, first_name: "Ann" }, chat: { id: 7001, type: "private" }, date: 1_700_000_000, ...message }
        })
      })
    assert.strictEqual((await hook(1, { text: "hi" })).status, 200)
    const [msg] = await query<{ id: number; thread_id: number }>(server, "SELECT id, thread_id FROM messages WHERE channel_id = $1 ORDER BY id", [ch.body.data.id])
    return { company, channelId: ch.body.data.id as number, threadId: msg.thread_id, hook }
  }

  it("uploads the stored bytes to sendPhoto / sendVoice as multipart", async () => {
    const { company, channelId, threadId } = await setup()
    const media = await uploadPng(company.token, "holiday.png")
    const res = await send(server, company.token, { channel_id: channelId, thread_id: threadId, text: "caption", attachments: [{ media_id: media.id }] })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.status, "sent")
    const call = tg.http.calls("sendPhoto").at(-1)!
    assert.strictEqual(call.body.caption, "caption")
    assert.strictEqual(call.files.photo.name, "holiday.png")
    assert.deepStrictEqual([...call.files.photo.bytes], [...media.bytes])

    const note = await upload(server, company.token, "/v1/uploads/voice", { bytes: tone("mp3"), name: "v.mp3", type: "audio/mpeg" })
    const voice = await send(server, company.token, { channel_id: channelId, thread_id: threadId, attachments: [{ media_id: note.body.media_id }] })
    assert.strictEqual(voice.body.data.status, "sent", JSON.stringify(voice.body))
    const voiceCall = tg.http.calls("sendVoice").at(-1)!
    assert.strictEqual(Buffer.from(voiceCall.files.voice.bytes.subarray(0, 4)).toString(), "OggS")
  })

  it("fetches an inbound photo through getFile into storage; the url becomes a stable signed link", async () => {
    const { company, channelId, hook } = await setup()
    const photo = await jpeg(800, 600)
    tg.files.set(`photo-${channelId}`, { path: `photos/file_${channelId}.jpg`, bytes: photo, contentType: "application/octet-stream" })
    assert.strictEqual((await hook(2, { caption: "pic", photo: [{ file_id: "small" }, { file_id: `photo-${channelId}` }] })).status, 200)
    const [msg] = await query<{ id: number }>(server, "SELECT id FROM messages WHERE channel_id = $1 AND message_type = 'image'", [channelId])
    const before = await request(server, "GET", `/v1/messages/${msg.id}/attachments`, { token: company.token })
    const att = before.body.data[0]
    assert.strictEqual(att.storage_path, null)
    assert.strictEqual(att.thumbnail_url, null)

    const fetched = await request(server, "POST", `/v1/messages/${msg.id}/attachments/${att.id}/fetch`, { token: company.token })
    assert.strictEqual(fetched.status, 200, JSON.stringify(fetched.body))
    assert.match(fetched.body.data.storage_path, new RegExp(`^c${company.id}/attachments/.+\\.jpg$`))
    assert.strictEqual(fetched.body.data.size, photo.byteLength)
    assert.deepStrictEqual(tg.http.calls("getFile").at(-1)!.body, { file_id: `photo-${channelId}` })
    const bytes = await getLink(server, fetched.body.data.url)
    assert.strictEqual(bytes.status, 200)
    assert.strictEqual(bytes.headers.get("content-type"), "image/jpeg")
    assert.deepStrictEqual(bytes.bytes, photo)
    const thumb = await getLink(server, fetched.body.data.thumbnail_url)
    assert.strictEqual(thumb.headers.get("content-type"), "image/webp")

    // Fetching again is a no-op: same file, no new download.
    const downloads = tg.http.calls("file").length
    const again = await request(server, "POST", `/v1/messages/${msg.id}/attachments/${att.id}/fetch`, { token: company.token })
    assert.strictEqual(again.body.data.url, fetched.body.data.url)
    assert.strictEqual(tg.http.calls("file").length, downloads)
    const updated = (await payloadsOf(server, company.id, "message.updated")).filter((p) => p.message.id === msg.id)
    assert.deepStrictEqual(updated.map((p) => p.change), ["attachments"])
  })

  it("answers 502 when the provider cannot serve the file, and 404 for an unknown attachment or another company", async () => {
    const { company, channelId, hook } = await setup()
    assert.strictEqual((await hook(3, { document: { file_id: `missing-${channelId}`, file_name: "a.pdf" } })).status, 200)
    const [msg] = await query<{ id: number }>(server, "SELECT id FROM messages WHERE channel_id = $1 AND message_type = 'document'", [channelId])
    const [att] = (await request(server, "GET", `/v1/messages/${msg.id}/attachments`, { token: company.token })).body.data
    const failed = await request(server, "POST", `/v1/messages/${msg.id}/attachments/${att.id}/fetch`, { token: company.token })
    assert.strictEqual(failed.status, 502, JSON.stringify(failed.body))
    assert.strictEqual((await request(server, "POST", `/v1/messages/${msg.id}/attachments/987654/fetch`, { token: company.token })).status, 404)
    const other = await createCompany(server)
    const foreign = await request(server, "POST", `/v1/messages/${msg.id}/attachments/${att.id}/fetch`, { token: other.token })
    assert.strictEqual(foreign.status, 404)
  })
})

describe("fetch refusals", () => {
  it("answers 422 attachment_not_fetchable for template, ephemeral and unsupported_type attachments", async () => {
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    for (const type of ["template", "ephemeral", "unsupported_type"]) {
      // Provider ingestion stores such rows; the sandbox has no way to make them, so the row is written here.
      const [row] = await query<{ id: number }>(
        server,
        "INSERT INTO attachments (company_id, message_id, type, url) VALUES ($1, $2, $3, 'data:text/plain;base64,aGk=') RETURNING id",
        [a.id, c.inboundId, type]
      )
      const res = await request(server, "POST", `/v1/messages/${c.inboundId}/attachments/${row.id}/fetch`, { token: a.token })
      assert.strictEqual(res.status, 422, type)
      assert.strictEqual(res.body.error_code, "attachment_not_fetchable", type)
    }
    // A fetchable sandbox row (its reference is a data URL) is stored.
    const [doc] = await query<{ id: number }>(
      server,
      "INSERT INTO attachments (company_id, message_id, type, url) VALUES ($1, $2, 'document', 'data:text/plain;base64,aGVsbG8=') RETURNING id",
      [a.id, c.inboundId]
    )
    const ok = await request(server, "POST", `/v1/messages/${c.inboundId}/attachments/${doc.id}/fetch`, { token: a.token })
    assert.strictEqual(ok.status, 200, JSON.stringify(ok.body))
    assert.strictEqual(ok.body.data.mime_type, "text/plain")
    const served = await getLink(server, ok.body.data.url)
    assert.strictEqual(Buffer.from(served.bytes).toString(), "hello")
    assert.strictEqual(served.headers.get("content-type"), "application/octet-stream")
  })
})

import { assert, describe, it } from "@effect/vitest"
import sharp from "sharp"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import { conversationOn } from "../messages/support.ts"
import { fileServer } from "../support/FileServer.ts"
import * as images from "../support/Images.ts"
import { query } from "../support/Sql.ts"
import { createCompany, getLink, request } from "../support/TestServer.ts"
import { createPack, listPacks, member, storeFile } from "./support.ts"
import { telegramChannel } from "./telegram.ts"

const tg = new TelegramFake()
const server = fileServer(() => ({ telegramApiBase: tg.http.url }), [tg.http])

/** An inbound message on a fresh channel with one attachment row; its file stored when `bytes` is given. */
const chatAttachment = async (
  company: { id: number; token: string },
  bytes: Uint8Array | null,
  mime = "image/webp"
) => {
  const chat = await conversationOn(server, company.token, "msgr_b")
  const path = bytes === null ? null : await storeFile(server, company.id, bytes, ".webp")
  const [row] = await query<{ id: number }>(
    server,
    `INSERT INTO attachments (company_id, message_id, type, mime_type, storage_path, size)
     VALUES ($1, $2, 'sticker', $3, $4, $5) RETURNING id`,
    [company.id, chat.inboundId, mime, path, bytes?.length ?? null]
  )
  return { messageId: chat.inboundId, attachmentId: row.id, channelId: chat.channelId }
}

const save = (token: string, body: Record<string, unknown>, packId?: number) =>
  request(server, "POST", packId === undefined ? "/v1/sticker-packs/stickers/from-message" : `/v1/sticker-packs/${packId}/stickers/from-message`, {
    token,
    body
  })

describe("stickers from a chat message", () => {
  it("saves a sticker received over Telegram once its file is fetched; an animated one is refused", async () => {
    const company = await createCompany(server)
    const bot = await telegramChannel(server, tg, company.token)
    const [channel] = await query<{ webhook_secret: string }>(server, "SELECT webhook_secret FROM channels WHERE id = $1", [bot.id])
    const receive = async (updateId: number, sticker: Record<string, unknown>) => {
      const res = await request(server, "POST", `/hooks/telegram/${bot.id}`, {
        headers: { "x-telegram-bot-api-secret-token": channel.webhook_secret },
        body: {
          update_id: updateId,
          message: { message_id: updateId, from: { id: 77, is_bot: false, first_name: "Ann" }, chat: { id: 77, type: "private" }, date: 1_700_000_000, sticker }
        }
      })
      assert.strictEqual(res.status, 200, JSON.stringify(res.body))
      const [row] = await query<{ message_id: number; id: number }>(
        server,
        `SELECT a.message_id, a.id FROM attachments a JOIN messages m ON m.id = a.message_id
         WHERE m.channel_id = $1 AND m.external_message_id = $2`,
        [bot.id, `77:${updateId}`]
      )
      return { message_id: row.message_id, attachment_id: row.id }
    }
    tg.files.set("static-sticker", { path: "stickers/file_1.webp", bytes: new Uint8Array(await images.webp(512, 512)), contentType: "image/webp" })
    tg.files.set("animated-sticker", { path: "stickers/file_2.tgs", bytes: new Uint8Array([0x1f, 0x8b, 8, 0, 1, 2, 3]), contentType: "application/x-tgsticker" })
    const still = await receive(1, { file_id: "static-sticker", emoji: "🙂", is_animated: false, is_video: false })
    const animated = await receive(2, { file_id: "animated-sticker", emoji: "🙂", is_animated: true, is_video: false })

    const early = await save(company.token, still)
    assert.deepStrictEqual([early.status, early.body.error_code], [422, "attachment_not_stored"])
    for (const a of [still, animated]) {
      const fetched = await request(server, "POST", `/v1/messages/${a.message_id}/attachments/${a.attachment_id}/fetch`, { token: company.token })
      assert.strictEqual(fetched.status, 200, JSON.stringify(fetched.body))
    }
    const saved = await save(company.token, still)
    assert.strictEqual(saved.status, 201, JSON.stringify(saved.body))
    const refused = await save(company.token, animated)
    assert.deepStrictEqual([refused.status, refused.body.error_code], [422, "sticker_not_webp"])
    const [pack] = await listPacks(server, company.token)
    assert.deepStrictEqual([pack.is_system, pack.stickers_count], [true, 1])
  })

  it("saves a WebP sticker into the system pack, made on first use and reused after", async () => {
    const company = await createCompany(server)
    assert.deepStrictEqual(await listPacks(server, company.token), [])
    const a = await chatAttachment(company, await images.webp(512, 512))
    const res = await save(company.token, { message_id: a.messageId, attachment_id: a.attachmentId })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.message, "Sticker saved.")
    const item = res.body.data.item
    assert.strictEqual(item.pack_id, res.body.data.pack_id)
    assert.deepStrictEqual([item.width, item.height, item.is_animated], [512, 512, false])
    const file = await getLink(server, item.url)
    assert.strictEqual((await sharp(file.bytes).metadata()).format, "webp")

    const b = await chatAttachment(company, await images.webp(300, 200))
    const second = await save(company.token, { message_id: b.messageId, attachment_id: b.attachmentId })
    assert.strictEqual(second.body.data.pack_id, res.body.data.pack_id)
    const packs = await listPacks(server, company.token)
    assert.strictEqual(packs.length, 1)
    assert.deepStrictEqual([packs[0].is_system, packs[0].source, packs[0].stickers_count], [true, "system", 2])
  })

  it("saves into a named pack of the company", async () => {
    const company = await createCompany(server)
    const pack = await createPack(server, company.token, { name: "Favourites" })
    const a = await chatAttachment(company, await images.webp())
    const res = await save(company.token, { message_id: a.messageId, attachment_id: a.attachmentId }, pack.id)
    assert.strictEqual(res.status, 201)
    assert.strictEqual(res.body.data.pack_id, pack.id)
    const packs = await listPacks(server, company.token)
    assert.deepStrictEqual(packs.map((p) => [p.name, p.is_system, p.stickers_count]), [["Favourites", false, 1]])
  })

  it("accepts only a real WebP by its bytes, whatever the stored mime type says", async () => {
    const company = await createCompany(server)
    const png = await chatAttachment(company, await images.png(), "image/webp")
    const res = await save(company.token, { message_id: png.messageId, attachment_id: png.attachmentId })
    assert.strictEqual(res.status, 422)
    assert.strictEqual(res.body.error_code, "sticker_not_webp")
    const webp = await chatAttachment(company, await images.webp(), "application/octet-stream")
    assert.strictEqual((await save(company.token, { message_id: webp.messageId, attachment_id: webp.attachmentId })).status, 201)
    const unfetched = await chatAttachment(company, null)
    const notStored = await save(company.token, { message_id: unfetched.messageId, attachment_id: unfetched.attachmentId })
    assert.deepStrictEqual([notStored.status, notStored.body.error_code], [422, "attachment_not_stored"])
    assert.strictEqual((await listPacks(server, company.token))[0].stickers_count, 1)
  })

  it("answers 422 for missing or foreign message and attachment ids, and makes no system pack", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const mine = await chatAttachment(company, await images.webp())
    const theirs = await chatAttachment(other, await images.webp())
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ message_id: 999999999, attachment_id: mine.attachmentId }, "message_id"],
      [{ message_id: theirs.messageId, attachment_id: theirs.attachmentId }, "message_id"],
      [{ message_id: mine.messageId, attachment_id: theirs.attachmentId }, "attachment_id"],
      [{ message_id: mine.messageId, attachment_id: 999999999 }, "attachment_id"]
    ]
    for (const [body, field] of cases) {
      const res = await save(company.token, body)
      assert.strictEqual(res.status, 422, JSON.stringify(body))
      assert.deepStrictEqual(Object.keys(res.body.errors), [field])
    }
    const shape = await save(company.token, { message_id: "x" })
    assert.strictEqual(shape.status, 422)
    assert.deepStrictEqual(await listPacks(server, company.token), [])
    // The stranger's own pack stays theirs: saving into it from outside is a 404.
    const theirPack = await createPack(server, other.token)
    const into = await save(company.token, { message_id: mine.messageId, attachment_id: mine.attachmentId }, theirPack.id)
    assert.deepStrictEqual([into.status, into.body.message], [404, "Sticker pack not found."])
  })

  it("answers 403 to an agent without access to the conversation's channel, and saves once a team grants it", async () => {
    const company = await createCompany(server)
    const agent = await member(server, company.id, "agent")
    const a = await chatAttachment(company, await images.webp())
    const denied = await save(agent.token, { message_id: a.messageId, attachment_id: a.attachmentId })
    assert.strictEqual(denied.status, 403)
    assert.deepStrictEqual(await listPacks(server, company.token), [])

    const team = await request(server, "POST", "/v1/teams", {
      token: company.token,
      body: { name: "Support", channel_access_mode: "custom", channel_ids: [a.channelId], member_ids: [agent.id] }
    })
    assert.strictEqual(team.status, 201)
    const allowed = await save(agent.token, { message_id: a.messageId, attachment_id: a.attachmentId })
    assert.strictEqual(allowed.status, 201)
  })
})

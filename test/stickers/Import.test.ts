import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import sharp from "sharp"
import { parseSetLink } from "../../src/stickers/Domain.ts"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import { createChannel } from "../messages/support.ts"
import { fileServer } from "../support/FileServer.ts"
import { connectPusher, listen, next, subscribe } from "../support/PusherClient.ts"
import { query } from "../support/Sql.ts"
import { createCompany, getLink, request } from "../support/TestServer.ts"
import { listPacks, member } from "./support.ts"
import { eventually, finishedEvents, importSet, stickerSet, telegramChannel } from "./telegram.ts"

const tg = new TelegramFake()
const server = fileServer(() => ({ telegramApiBase: tg.http.url }), [tg.http])

const jobCount = (companyId: number) =>
  query<{ n: number }>(server, "SELECT count(*)::int AS n FROM jobs WHERE kind = 'sticker.import' AND company_id = $1", [companyId]).then((r) => r[0].n)

const finished = (token: string) => eventually(async () => (await finishedEvents(server, token))[0])

describe("set links", () => {
  it("reads t.me and telegram.me links, the app link and a bare name; anything else is broken", () => {
    const name = "Cute_Cats_by_some_bot"
    for (const link of [name, `https://t.me/addstickers/${name}`, `http://www.t.me/addstickers/${name}/`, `t.me/addstickers/${name}?x=1`, `https://telegram.me/addstickers/${name}`, `tg://addstickers?set=${name}`, `  ${name}  `]) {
      assert.strictEqual(parseSetLink(link), name, link)
    }
    for (const link of ["https://t.me/addstickers/", "https://example.com/addstickers/abc", "two words", "name-with-dash", "t.me/joinchat/abc", "x".repeat(65)]) {
      assert.strictEqual(parseSetLink(link), null, link)
    }
  })
})

describe("POST /v1/sticker-packs/import/telegram: the synchronous checks", () => {
  it("answers 422 for a broken link, without a bot, for a missing, empty or fully animated set, and queues nothing", async () => {
    const company = await createCompany(server)
    const broken = await importSet(server, company.token, "https://example.com/addstickers/x")
    assert.strictEqual(broken.status, 422)
    assert.deepStrictEqual([broken.body.error_code, Object.keys(broken.body.errors)], ["sticker_link_invalid", ["link"]])

    const set = await stickerSet(tg, ["static"])
    await createChannel(server, company.token, "msgr_b")
    const noBot = await importSet(server, company.token, set.name)
    assert.deepStrictEqual([noBot.status, noBot.body.error_code], [422, "telegram_bot_unavailable"])
    const bot = await telegramChannel(server, tg, company.token)
    await request(server, "PATCH", `/v1/channels/${bot.id}`, { token: company.token, body: { status: "disconnected" } })
    const disconnected = await importSet(server, company.token, set.name)
    assert.deepStrictEqual([disconnected.status, disconnected.body.error_code], [422, "telegram_bot_unavailable"])
    await request(server, "PATCH", `/v1/channels/${bot.id}`, { token: company.token, body: { status: "connected" } })

    const missing = await importSet(server, company.token, "https://t.me/addstickers/No_Such_Set_by_fake_crm_bot")
    assert.deepStrictEqual([missing.status, missing.body.error_code], [422, "sticker_set_not_found"])
    const empty = await stickerSet(tg, [])
    assert.deepStrictEqual((await importSet(server, company.token, empty.name)).body.error_code, "sticker_set_empty")
    const animated = await stickerSet(tg, ["animated", "video", "animated"])
    const onlyAnimated = await importSet(server, company.token, animated.name)
    assert.deepStrictEqual([onlyAnimated.status, onlyAnimated.body.error_code], [422, "sticker_set_animated"])

    assert.strictEqual(await jobCount(company.id), 0)
    assert.deepStrictEqual(await listPacks(server, company.token), [])
    assert.strictEqual(tg.http.calls("getFile").filter((c) => c.path.includes(bot.botToken)).length, 0)
  })

  it("answers 502 when Telegram cannot be reached, and queues nothing", async () => {
    const company = await createCompany(server)
    await telegramChannel(server, tg, company.token)
    const set = await stickerSet(tg, ["static"])
    tg.http.inject("getStickerSet", { status: 502, body: { ok: false, error_code: 502, description: "Bad Gateway" } })
    const res = await importSet(server, company.token, set.name)
    assert.strictEqual(res.status, 502)
    assert.strictEqual(await jobCount(company.id), 0)
  })

  it("needs sticker.create: an agent may import, a foreign company's channel is never used", async () => {
    const owner = await createCompany(server)
    await telegramChannel(server, tg, owner.token)
    const stranger = await createCompany(server)
    const set = await stickerSet(tg, ["static"])
    const foreign = await importSet(server, stranger.token, set.name)
    assert.deepStrictEqual([foreign.status, foreign.body.error_code], [422, "telegram_bot_unavailable"])
    const agent = await member(server, owner.id, "agent")
    const res = await importSet(server, agent.token, `https://t.me/addstickers/${set.name}`)
    assert.strictEqual(res.status, 202)
    const event = await finished(owner.token)
    assert.strictEqual(event.data.imported, 1)
    assert.deepStrictEqual(await finishedEvents(server, stranger.token), [])
  })
})

describe("the background import", () => {
  it.live("downloads the static stickers through the Bot API, keeps their emoji and announces the outcome", () =>
    Effect.gen(function*() {
      const company = yield* Effect.promise(() => createCompany(server))
      const bot = yield* Effect.promise(() => telegramChannel(server, tg, company.token))
      const emoji = ["😺", "🔥", "", "👍🏽", "🎉", "🙂"]
      const set = yield* Effect.promise(() =>
        stickerSet(tg, ["static", "animated", "static", "video", "static", "static"], { title: "Cats & Co", emoji: (i) => emoji[i] })
      )
      const client = yield* connectPusher({ realtimePort: server.realtimePort, appKey: server.pusherAppKey, apiUrl: server.url, token: company.token })
      const channel = yield* subscribe(client, `private-company.${company.id}`)
      const events = yield* listen(channel, "sticker.pack.import.finished")

      const res = yield* Effect.promise(() => importSet(server, company.token, `https://t.me/addstickers/${set.name}`))
      assert.strictEqual(res.status, 202)
      assert.deepStrictEqual(res.body, { data: { status: "queued", name: set.name, title: "Cats & Co" } })

      const realtime = (yield* next(events)) as any
      assert.strictEqual(realtime.event, "sticker.pack.import.finished")
      const packs = yield* Effect.promise(() => listPacks(server, company.token))
      assert.strictEqual(packs.length, 1)
      const [pack] = packs
      assert.deepStrictEqual(realtime.data, {
        outcome: "success",
        name: set.name,
        title: "Cats & Co",
        pack_id: pack.id,
        imported: 4,
        skipped_animated: 2,
        truncated: false,
        failed: 0,
        error: null
      })
      assert.deepStrictEqual([pack.name, pack.source, pack.is_system, pack.tray_emoji, pack.stickers_count], ["Cats & Co", "telegram", false, "😺", 4])
      assert.deepStrictEqual(pack.stickers.map((s: any) => s.emoji_tags), [["😺"], [], ["🎉"], ["🙂"]])
      const file = yield* Effect.promise(() => getLink(server, pack.stickers[0].url))
      const meta = yield* Effect.promise(() => sharp(file.bytes).metadata())
      assert.deepStrictEqual([meta.format, meta.width, meta.height], ["webp", 512, 512])

      // Only the static stickers were downloaded, through this company's bot.
      const downloads = tg.http.calls("file").filter((c) => c.path.startsWith(`/file/bot${bot.botToken}/`)).map((c) => c.path.split("/").pop())
      assert.sameMembers(downloads, [0, 2, 4, 5].map((i) => `${set.name}-${i}-static.webp`))
      // The replay endpoint has the same event.
      const replayed = yield* Effect.promise(() => finishedEvents(server, company.token))
      assert.deepStrictEqual(replayed.map((e) => e.data), [realtime.data])
      const [job] = yield* Effect.promise(() =>
        query<{ status: string; outcome: string; lease_owner: string | null }>(
          server,
          "SELECT status, result->>'outcome' AS outcome, lease_owner FROM jobs WHERE kind = 'sticker.import' AND company_id = $1",
          [company.id]
        )
      )
      assert.deepStrictEqual(job, { status: "finished", outcome: "success", lease_owner: null })
    }))

  it("stops at 120 static stickers and flags the truncation", async () => {
    const company = await createCompany(server)
    await telegramChannel(server, tg, company.token)
    const kinds = [...Array(3).fill("animated"), ...Array(125).fill("static")]
    const set = await stickerSet(tg, kinds)
    const res = await importSet(server, company.token, set.name)
    assert.strictEqual(res.status, 202)
    const event = await eventually(async () => (await finishedEvents(server, company.token))[0], 60_000)
    assert.deepStrictEqual(
      [event.data.outcome, event.data.imported, event.data.skipped_animated, event.data.truncated],
      ["success", 120, 3, true]
    )
    const [pack] = await listPacks(server, company.token)
    assert.strictEqual(pack.stickers_count, 120)
  }, 90_000)

  it("counts a sticker Telegram will not serve as failed and keeps the rest; nothing usable is an error outcome", async () => {
    const company = await createCompany(server)
    await telegramChannel(server, tg, company.token)
    const set = await stickerSet(tg, ["static", "static", "static"])
    tg.files.delete(set.stickers[1].file_id)
    assert.strictEqual((await importSet(server, company.token, set.name)).status, 202)
    const event = await finished(company.token)
    assert.deepStrictEqual([event.data.outcome, event.data.imported, event.data.failed], ["success", 2, 1])

    const broken = await stickerSet(tg, ["static"])
    tg.files.set(broken.stickers[0].file_id, { path: "stickers/bad.webp", bytes: new TextEncoder().encode("not a picture"), contentType: "image/webp" })
    assert.strictEqual((await importSet(server, company.token, broken.name)).status, 202)
    const failed = await eventually(async () => (await finishedEvents(server, company.token)).find((e) => e.data.name === broken.name))
    assert.deepStrictEqual(
      [failed.data.outcome, failed.data.imported, failed.data.failed, failed.data.pack_id, failed.data.error],
      ["error", 0, 1, null, "No sticker of the set could be imported."]
    )
    assert.strictEqual((await listPacks(server, company.token)).length, 1)
  })
})

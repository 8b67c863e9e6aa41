import { randomBytes } from "node:crypto"
import type { FakeSticker, TelegramFake } from "../fakes/TelegramFake.ts"
import { unique } from "../support/Ids.ts"
import * as images from "../support/Images.ts"
import { request, type RunningServer } from "../support/TestServer.ts"

export const newBotToken = () => `${100000 + Math.floor(Math.random() * 899999)}:${randomBytes(24).toString("base64url")}`

/** A Telegram channel of the company whose bot the fake knows. */
export const telegramChannel = async (server: RunningServer, fake: TelegramFake, token: string) => {
  const botToken = newBotToken()
  fake.tokens.add(botToken)
  const res = await request(server, "POST", "/v1/channels", {
    token,
    body: { type: "msgr_b", provider: "telegram", name: unique("bot"), credentials: { bot_token: botToken } }
  })
  if (res.status !== 201) throw new Error(`telegramChannel: ${res.status} ${JSON.stringify(res.body)}`)
  return { id: res.body.data.id as number, botToken }
}

export type Kind = "static" | "animated" | "video"

/**
 * A set getStickerSet answers, with its files behind getFile: static stickers are real
 * 512x512 WebP images, animated ones TGS-like gzip bytes, video ones WebM-like bytes.
 */
export const stickerSet = async (
  fake: TelegramFake,
  kinds: ReadonlyArray<Kind>,
  options: { readonly name?: string; readonly title?: string; readonly emoji?: (index: number) => string | undefined } = {}
) => {
  const name = options.name ?? `${unique("set").replace(/-/g, "_")}_by_fake_crm_bot`
  const webp = new Uint8Array(await images.webp(512, 512))
  const stickers: Array<FakeSticker> = kinds.map((kind, index) => {
    const fileId = `${name}-${index}-${kind}`
    const extension = kind === "static" ? "webp" : kind === "animated" ? "tgs" : "webm"
    const bytes = kind === "static" ? webp : new Uint8Array([0x1f, 0x8b, 8, 0, ...randomBytes(64)])
    fake.files.set(fileId, { path: `stickers/${fileId}.${extension}`, bytes, contentType: "application/octet-stream" })
    const emoji = options.emoji?.(index) ?? "😀"
    return {
      file_id: fileId,
      file_unique_id: `u-${fileId}`,
      type: "regular",
      width: 512,
      height: 512,
      is_animated: kind === "animated",
      is_video: kind === "video",
      ...(emoji === "" ? {} : { emoji }),
      set_name: name,
      file_size: bytes.length
    }
  })
  fake.stickerSets.set(name, { name, title: options.title ?? `Title of ${name}`, sticker_type: "regular", stickers })
  return { name, title: options.title ?? `Title of ${name}`, stickers }
}

export const importSet = (server: RunningServer, token: string, link: string) =>
  request(server, "POST", "/v1/sticker-packs/import/telegram", { token, body: { link } })

/** The company's `sticker.pack.import.finished` events after `after`, through the replay endpoint. */
export const finishedEvents = async (server: RunningServer, token: string, after = 0) => {
  const res = await request(server, "GET", `/v1/events?after=${after}&limit=500`, { token })
  return (res.body.data.items as Array<any>).filter((e) => e.event === "sticker.pack.import.finished")
}

/** Polls until `check` gives a value (the import runs in the background). */
export const eventually = async <A>(check: () => Promise<A | undefined>, timeoutMs = 20_000): Promise<A> => {
  const started = Date.now()
  while (Date.now() - started < timeoutMs) {
    const value = await check()
    if (value !== undefined) return value
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error("timed out")
}

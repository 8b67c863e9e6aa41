import { FakeHttp, type FakeAnswer, type FakeRequest } from "./FakeHttp.ts"

/** A sticker as getStickerSet describes it (https://core.telegram.org/bots/api#sticker). */
export interface FakeSticker {
  readonly file_id: string
  readonly file_unique_id: string
  readonly type: "regular" | "mask" | "custom_emoji"
  readonly width: number
  readonly height: number
  readonly is_animated: boolean
  readonly is_video: boolean
  readonly emoji?: string
  readonly set_name?: string
  readonly file_size?: number
}

export interface FakeStickerSet {
  readonly name: string
  readonly title: string
  readonly sticker_type: "regular" | "mask" | "custom_emoji"
  readonly stickers: ReadonlyArray<FakeSticker>
}

/**
 * The slice of the Telegram Bot API (https://core.telegram.org/bots/api) our adapter uses:
 * `POST /bot<token>/<method>` with JSON or multipart, answers `{ok, result}` or
 * `{ok:false, error_code, description}`; files at `GET /file/bot<token>/<file_path>`.
 */
export class TelegramFake {
  /** Its server; route keys for `inject` and `calls` are the method name, or `"file"` for a download. */
  readonly http: FakeHttp
  readonly tokens = new Set<string>()
  readonly webhooks = new Map<string, { url: string; secret_token: string | undefined }>()
  /** Files getFile knows: file_id -> path and bytes. */
  readonly files = new Map<string, { path: string; bytes: Uint8Array; contentType: string }>()
  /** Sets getStickerSet knows, by name (add their files to `files`). */
  readonly stickerSets = new Map<string, FakeStickerSet>()
  private readonly messages = new Map<string, { text: string | null }>()
  private nextId = 100

  constructor() {
    this.http = new FakeHttp(
      (r) => {
        const file = /^\/file\/bot[^/]+\//.test(r.path)
        return file ? "file" : r.path.split("/").pop() ?? ""
      },
      (r) => this.route(r)
    )
  }

  private ok(result: unknown): FakeAnswer {
    return { status: 200, body: { ok: true, result } }
  }

  private error(code: number, description: string): FakeAnswer {
    return { status: code, body: { ok: false, error_code: code, description } }
  }

  private message(chatId: unknown, extra: Record<string, unknown>) {
    const id = this.nextId++
    const chat = Number(chatId)
    this.messages.set(`${chat}:${id}`, { text: typeof extra.text === "string" ? extra.text : null })
    return {
      message_id: id,
      date: Math.floor(Date.now() / 1000),
      chat: chat < 0 ? { id: chat, type: "group", title: "Group" } : { id: chat, type: "private", first_name: "User" },
      ...extra
    }
  }

  private route(r: FakeRequest): FakeAnswer {
    const match = /^\/(file\/)?bot([^/]+)\/(.+)$/.exec(r.path)
    if (match === null) return { status: 404, body: { ok: false, error_code: 404, description: "Not Found" } }
    const [, file, token, rest] = match
    if (!this.tokens.has(token)) return this.error(401, "Unauthorized")
    if (file !== undefined) {
      const found = [...this.files.values()].find((f) => f.path === rest)
      return found === undefined
        ? { status: 404, body: { ok: false, error_code: 404, description: "Not Found" } }
        : { status: 200, bytes: found.bytes, contentType: found.contentType }
    }
    const b = r.body
    const upload = (field: string) => b[field] ?? (r.files[field] !== undefined ? `uploaded:${r.files[field].name}` : undefined)
    switch (rest) {
      case "getMe":
        return this.ok({ id: 4242, is_bot: true, first_name: "Fake Bot", username: "fake_crm_bot" })
      case "setWebhook":
        if (typeof b.url !== "string" || !b.url.startsWith("http")) return this.error(400, "Bad Request: bad webhook: invalid URL")
        this.webhooks.set(token, { url: b.url, secret_token: b.secret_token as string | undefined })
        return this.ok(true)
      case "sendMessage":
        if (b.chat_id === undefined) return this.error(400, "Bad Request: chat_id is empty")
        if (typeof b.text !== "string" || b.text === "") return this.error(400, "Bad Request: message text is empty")
        return this.ok(this.message(b.chat_id, { text: b.text }))
      case "sendPhoto":
      case "sendDocument":
      case "sendVoice":
      case "sendAudio":
      case "sendVideo":
      case "sendSticker": {
        const field = rest.slice(4).toLowerCase()
        const value = upload(field)
        if (b.chat_id === undefined) return this.error(400, "Bad Request: chat_id is empty")
        if (value === undefined) return this.error(400, `Bad Request: there is no ${field} in the request`)
        const media = field === "photo"
          ? { photo: [{ file_id: `small-${this.nextId}`, width: 90, height: 90 }, { file_id: `big-${this.nextId}`, width: 800, height: 800 }] }
          : { [field]: { file_id: `${field}-${this.nextId}` } }
        return this.ok(this.message(b.chat_id, { ...media, ...(b.caption !== undefined ? { caption: b.caption } : {}) }))
      }
      case "editMessageText": {
        const key = `${Number(b.chat_id)}:${Number(b.message_id)}`
        const existing = this.messages.get(key)
        if (existing === undefined) return this.error(400, "Bad Request: message to edit not found")
        if (existing.text === b.text) {
          return this.error(400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
        }
        existing.text = b.text as string
        return this.ok({ message_id: Number(b.message_id), chat: { id: Number(b.chat_id), type: "private" }, date: 0, text: b.text })
      }
      case "deleteMessage": {
        const key = `${Number(b.chat_id)}:${Number(b.message_id)}`
        if (!this.messages.delete(key)) return this.error(400, "Bad Request: message to delete not found")
        return this.ok(true)
      }
      case "setMessageReaction":
        if (!Array.isArray(b.reaction)) return this.error(400, "Bad Request: reaction must be an array")
        return this.ok(true)
      case "getStickerSet": {
        const set = typeof b.name === "string" ? this.stickerSets.get(b.name) : undefined
        return set === undefined ? this.error(400, "Bad Request: STICKERSET_INVALID") : this.ok(set)
      }
      case "getFile": {
        const found = this.files.get(String(b.file_id))
        if (found === undefined) return this.error(400, "Bad Request: invalid file_id")
        return this.ok({ file_id: b.file_id, file_unique_id: "u1", file_size: found.bytes.length, file_path: found.path })
      }
      default:
        return this.error(404, "Not Found: method not found")
    }
  }
}

import { Schema } from "effect"

/** Spec limits of an upload: 1-120 files of up to 5 MB and 25 megapixels (`maxDecodePixels`) each. */
export const maxFilesPerUpload = 120
export const maxInputBytes = 5 * 1024 * 1024
/** Every file at its limit, plus room for the multipart framing and one oversized file being drained. */
export const maxUploadBytes = (maxFilesPerUpload + 1) * maxInputBytes + 1024 * 1024

export const StickerPackId = Schema.Int
export type StickerPackId = typeof StickerPackId.Type
export const StickerId = Schema.Int
export type StickerId = typeof StickerId.Type

/** `manual` (POST /v1/sticker-packs), `system` (the lazily made pack of stickers saved from chats), `telegram` (imported). */
export const PackSources = ["manual", "system", "telegram"] as const
export type PackSource = typeof PackSources[number]

export const Sticker = Schema.Struct({
  id: StickerId,
  pack_id: StickerPackId,
  /** Permanent signed link to `GET /v1/stickers/{id}/file`. */
  url: Schema.String,
  width: Schema.Int,
  height: Schema.Int,
  size: Schema.Int,
  is_animated: Schema.Boolean,
  emoji_tags: Schema.Array(Schema.String),
  position: Schema.Int
}).annotate({ identifier: "Sticker" })
export type Sticker = typeof Sticker.Type

export const StickerPack = Schema.Struct({
  id: StickerPackId,
  name: Schema.String,
  is_system: Schema.Boolean,
  source: Schema.Literals(PackSources),
  tray_emoji: Schema.NullOr(Schema.String),
  position: Schema.Int,
  stickers_count: Schema.Int,
  stickers: Schema.Array(Sticker)
}).annotate({ identifier: "StickerPack" })
export type StickerPack = typeof StickerPack.Type

export const Skipped = Schema.Struct({ filename: Schema.String, reason: Schema.String })
export type Skipped = typeof Skipped.Type

// One emoji: pictographs with their modifiers, joiners and variation selectors, flags, keycaps.
const emojiChars = /^[\p{Emoji}\p{Emoji_Component}\u200d\ufe0f\u20e3]+$/u
const emojiCore = /\p{Extended_Pictographic}|\p{Regional_Indicator}|\u20e3/u
export const isEmoji = (value: string) => value.length <= 32 && emojiChars.test(value) && emojiCore.test(value)

const Emoji = (field: string) =>
  Schema.String.check(Schema.makeFilter((value: string) => isEmoji(value) || `The ${field} field must be an emoji.`))

const Name = Schema.String.check(
  Schema.isPattern(/\S/, { message: "The name field is required." }),
  Schema.isMaxLength(255, { message: "The name field must not be greater than 255 characters." })
)

const Position = Schema.Int.check(
  Schema.isBetween({ minimum: 0, maximum: 1_000_000 }, { message: "The position field must be between 0 and 1000000." })
)

export const CreatePack = Schema.Struct({
  name: Name,
  tray_emoji: Schema.optional(Schema.NullOr(Emoji("tray emoji")))
})
export type CreatePack = typeof CreatePack.Type

/** Absent keys stay as they are; `tray_emoji: null` clears it. */
export const UpdatePack = Schema.Struct({
  name: Schema.optional(Name),
  tray_emoji: Schema.optional(Schema.NullOr(Emoji("tray emoji"))),
  position: Schema.optional(Position)
})
export type UpdatePack = typeof UpdatePack.Type

export const UpdateSticker = Schema.Struct({
  emoji_tags: Schema.optional(
    Schema.Array(Emoji("emoji tags")).check(
      Schema.isMaxLength(20, { message: "The emoji tags field must not have more than 20 items." })
    )
  ),
  position: Schema.optional(Position),
  sticker_pack_id: Schema.optional(StickerPackId)
})
export type UpdateSticker = typeof UpdateSticker.Type

export const FromMessage = Schema.Struct({
  message_id: Schema.Int,
  attachment_id: Schema.Int
})
export type FromMessage = typeof FromMessage.Type

export const ImportTelegram = Schema.Struct({
  link: Schema.String.check(
    Schema.isPattern(/\S/, { message: "The link field is required." }),
    Schema.isMaxLength(255, { message: "The link field must not be greater than 255 characters." })
  )
})
export type ImportTelegram = typeof ImportTelegram.Type

export const ImportQueued = Schema.Struct({
  status: Schema.Literal("queued"),
  name: Schema.String,
  title: Schema.String
})

/** A set name from `https://t.me/addstickers/<name>` (also telegram.me, `tg://addstickers?set=`) or the bare name. */
export const parseSetLink = (link: string): string | null => {
  const trimmed = link.trim()
  const name = /^[A-Za-z0-9_]{1,64}$/
  if (name.test(trimmed)) return trimmed
  const web = /^(?:https?:\/\/)?(?:www\.)?(?:t|telegram)\.me\/addstickers\/([A-Za-z0-9_]{1,64})\/?(?:[?#].*)?$/i.exec(trimmed)
  if (web !== null) return web[1]
  const app = /^tg:\/\/addstickers\?set=([A-Za-z0-9_]{1,64})(?:&.*)?$/i.exec(trimmed)
  return app === null ? null : app[1]
}

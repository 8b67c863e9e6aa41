import { Data, Effect } from "effect"
import { loadSharp, maxDecodePixels } from "../platform/files/Imaging.ts"
import { maxInputBytes } from "./Domain.ts"

export const stickerSide = 512
/** Beyond the spec: WhatsApp refuses static stickers over 100 KB. */
export const maxOutputBytes = 100 * 1024

/** Why a file did not become a sticker (`skipped[].reason` of an upload). */
export type SkipReason = "unsupported_format" | "file_too_large" | "too_many_pixels" | "unreadable_image" | "output_too_large"

export class StickerImageRejected extends Data.TaggedError("StickerImageRejected")<{
  readonly reason: SkipReason
  readonly message: string
}> {}

export interface ConvertedSticker {
  readonly bytes: Uint8Array
  readonly width: number
  readonly height: number
  readonly size: number
}

const startsWith = (bytes: Uint8Array, offset: number, ascii: string) =>
  bytes.length >= offset + ascii.length && [...ascii].every((c, i) => bytes[offset + i] === c.charCodeAt(0))

/** `RIFF<size>WEBP`: a WebP container, whatever the sender claimed its type was. */
export const isWebp = (bytes: Uint8Array) => startsWith(bytes, 0, "RIFF") && startsWith(bytes, 8, "WEBP")

/** The accepted input formats, by their byte signatures (an extension or a mime type proves nothing). */
export const sniffFormat = (bytes: Uint8Array): "png" | "jpeg" | "webp" | null => {
  if (bytes.length >= 8 && bytes[0] === 0x89 && startsWith(bytes, 1, "PNG\r\n\u001a\n")) return "png"
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return "jpeg"
  if (isWebp(bytes)) return "webp"
  return null
}

const reject = (reason: SkipReason, message: string) => new StickerImageRejected({ reason, message })

const decodeFailure = (cause: unknown) => {
  const text = cause instanceof Error ? cause.message : String(cause)
  return /pixel limit/i.test(text)
    ? reject("too_many_pixels", `The image is larger than ${maxDecodePixels / 1_000_000} megapixels.`)
    : reject("unreadable_image", "The image could not be decoded.")
}

// Lower quality stepwise until the WebP fits; a 512x512 sticker of ordinary artwork fits at the first step.
const qualities = [90, 80, 70, 60, 50, 40, 30, 20, 10] as const

/**
 * A PNG, JPEG or WebP (first frame only) as a static 512x512 WebP: scaled to fit
 * (`contain`) on a transparent canvas, under `maxOutputBytes`. Input beyond 25 megapixels
 * is refused from its header before any pixel is decoded, and libvips enforces the same
 * limit while decoding, so a forged header cannot get past it.
 */
export const convertToSticker = (bytes: Uint8Array): Effect.Effect<ConvertedSticker, StickerImageRejected> =>
  Effect.gen(function*() {
    if (bytes.byteLength > maxInputBytes) {
      return yield* reject("file_too_large", `The file is larger than ${maxInputBytes / 1024 / 1024} MB.`)
    }
    if (sniffFormat(bytes) === null) return yield* reject("unsupported_format", "Only PNG, JPEG and WebP images are accepted.")
    const sharp = yield* loadSharp
    const options = { limitInputPixels: maxDecodePixels, failOn: "error", autoOrient: true, pages: 1 } as const
    const meta = yield* Effect.tryPromise({ try: () => sharp(bytes, options).metadata(), catch: decodeFailure })
    if ((meta.width ?? 0) * (meta.pageHeight ?? meta.height ?? 0) > maxDecodePixels) {
      return yield* reject("too_many_pixels", `The image is larger than ${maxDecodePixels / 1_000_000} megapixels.`)
    }
    const canvas = yield* Effect.tryPromise({
      try: () =>
        sharp(bytes, options)
          .resize(stickerSide, stickerSide, { fit: "contain", background: { r: 0, g: 0, b: 0, alpha: 0 } })
          .ensureAlpha()
          .raw()
          .toBuffer({ resolveWithObject: true }),
      catch: decodeFailure
    })
    const raw = { raw: { width: canvas.info.width, height: canvas.info.height, channels: canvas.info.channels } } as const
    for (const quality of qualities) {
      const out = yield* Effect.tryPromise({
        try: () => sharp(canvas.data, raw).webp({ quality, alphaQuality: Math.max(quality, 50), effort: 4 }).toBuffer(),
        catch: decodeFailure
      })
      if (out.byteLength <= maxOutputBytes) {
        return { bytes: new Uint8Array(out.buffer, out.byteOffset, out.byteLength), width: canvas.info.width, height: canvas.info.height, size: out.byteLength }
      }
    }
    return yield* reject("output_too_large", `The image does not fit in a ${maxOutputBytes / 1024} KB sticker.`)
  })

import { Context, Effect, Layer, Option } from "effect"
import type { HttpServerResponse } from "effect/http"
import type { NotFound } from "../platform/Errors.ts"
import { BlobStore } from "../platform/files/BlobStore.ts"
import { bytesFileResponse, fileResponse } from "../platform/files/FileResponse.ts"
import { Imaging, loadSharp, maxDecodePixels, thumbnailPath, webpOfWidth } from "../platform/files/Imaging.ts"

/** Spec: a WebP preview at most 256 px wide for a decodable image wider than that; the original otherwise. */
export const previewWidth = 256

const cacheControl = "private, max-age=86400"

const formatMime: Record<string, string> = {
  jpeg: "image/jpeg",
  png: "image/png",
  webp: "image/webp",
  gif: "image/gif",
  avif: "image/avif",
  heif: "image/heif",
  tiff: "image/tiff"
}

/** Width as displayed (EXIF orientations 5-8 swap the axes), or None when sharp cannot decode it within the limits. */
const displayedWidth = (input: string | Uint8Array) =>
  Effect.flatMap(loadSharp, (sharp) =>
    Effect.tryPromise(() => sharp(input, { limitInputPixels: maxDecodePixels, failOn: "error", animated: false }).metadata())).pipe(
    Effect.map((meta) =>
      meta.width === undefined
        ? Option.none()
        : Option.some({ width: (meta.orientation ?? 1) >= 5 ? meta.height ?? meta.width : meta.width, format: meta.format ?? "" })
    ),
    Effect.orElseSucceed(() => Option.none<{ readonly width: number; readonly format: string }>())
  )

const toPreview = (input: string | Uint8Array) => Effect.option(webpOfWidth(input, previewWidth))

type Answer = Option.Option<HttpServerResponse.HttpServerResponse>

/**
 * What the photo routes (`/v1/contacts/{id}/photo`, `/v1/users/{id}/photo`) answer for an image:
 * a decodable image wider than 256 px as a WebP preview 256 px wide, anything else as the
 * original. Decoding takes the runner's imaging permits.
 */
export class PhotoFiles extends Context.Service<PhotoFiles, {
  /** A stored image: its kept preview (made once, next to it) when it is wide enough, else the file; None when the file is gone. */
  stored(path: string, mimeType: string | null): Effect.Effect<Answer, NotFound>
  /** Bytes from elsewhere (a fetched picture): None unless they decode as an image, so the route never proxies other content. */
  bytes(bytes: Uint8Array): Effect.Effect<Answer>
}>()("crm/media/PhotoFiles") {
  static readonly layer = Layer.effect(
    PhotoFiles,
    Effect.gen(function*() {
      const store = yield* BlobStore
      const imaging = yield* Imaging

      const stored = Effect.fnUntraced(function*(path: string, mimeType: string | null) {
        if (Option.isNone(yield* store.size(path).pipe(Effect.orDie))) return Option.none()
        const previewPath = thumbnailPath(path, previewWidth)
        if (Option.isSome(yield* store.size(previewPath).pipe(Effect.orDie))) {
          return Option.some(yield* fileResponse(store, previewPath, { mimeType: "image/webp", fileName: null, cacheControl }))
        }
        const absolute = yield* store.absolute(path).pipe(Effect.orDie)
        const decoded = yield* imaging.run(displayedWidth(absolute))
        if (Option.isSome(decoded) && decoded.value.width > previewWidth) {
          const preview = yield* imaging.run(toPreview(absolute))
          if (Option.isSome(preview)) {
            yield* store.write(previewPath, preview.value).pipe(Effect.orDie)
            return Option.some(yield* fileResponse(store, previewPath, { mimeType: "image/webp", fileName: null, cacheControl }))
          }
        }
        const type = mimeType ?? Option.match(decoded, { onNone: () => null, onSome: (d) => formatMime[d.format] ?? null })
        return Option.some(yield* fileResponse(store, path, { mimeType: type, fileName: null, cacheControl }))
      })

      const bytes = Effect.fnUntraced(function*(input: Uint8Array) {
        const decoded = yield* imaging.run(displayedWidth(input))
        if (Option.isNone(decoded)) return Option.none()
        if (decoded.value.width > previewWidth) {
          const preview = yield* imaging.run(toPreview(input))
          if (Option.isSome(preview)) {
            return Option.some(yield* bytesFileResponse(preview.value, { mimeType: "image/webp", fileName: null, cacheControl }))
          }
        }
        const type = formatMime[decoded.value.format]
        if (type === undefined) return Option.none()
        return Option.some(yield* bytesFileResponse(input, { mimeType: type, fileName: null, cacheControl }))
      })

      return PhotoFiles.of({ stored, bytes })
    })
  )
}

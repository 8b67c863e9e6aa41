import { Context, Effect, Layer, Option, Semaphore } from "effect"
import { HttpServerResponse } from "effect/http"
import { lookup } from "node:dns/promises"
import { BlockList, isIP } from "node:net"
import sharp from "sharp"
import { BlobStore, ownedBy } from "../media/BlobStore.ts"
import { fileResponse, maxDecodePixels } from "../media/Media.ts"
import { AppConfig } from "../platform/Config.ts"
import { type NotFound, notFound } from "../platform/Errors.ts"
import { contactNotFound } from "./Contacts.ts"
import { ContactsRepo } from "./Repo.ts"

/** Spec: a WebP preview at most 256 px wide for a decodable image wider than that; the original otherwise. */
export const previewWidth = 256
/** A remote account picture larger than this is not fetched. */
const remoteLimitBytes = 5 * 1024 * 1024

const photoNotFound = () => notFound("Photo not found.")

const cacheControl = "private, max-age=86400"

/** Hosts a server-side fetch must not reach: loopback, private, link-local, CGNAT, multicast and reserved ranges. */
const internal = new BlockList()
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
  ["224.0.0.0", 3]
] as const) internal.addSubnet(net, prefix, "ipv4")
for (const [net, prefix] of [["::", 127], ["fc00::", 7], ["fe80::", 10], ["ff00::", 8]] as const) internal.addSubnet(net, prefix, "ipv6")

const isInternal = (address: string) => {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped !== null) return internal.check(mapped[1], "ipv4")
  return internal.check(address, isIP(address) === 6 ? "ipv6" : "ipv4")
}

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
  Effect.tryPromise(() => sharp(input, { limitInputPixels: maxDecodePixels, failOn: "error", animated: false }).metadata()).pipe(
    Effect.map((meta) =>
      meta.width === undefined
        ? Option.none()
        : Option.some({ width: (meta.orientation ?? 1) >= 5 ? meta.height ?? meta.width : meta.width, format: meta.format ?? "" })
    ),
    Effect.orElseSucceed(() => Option.none<{ readonly width: number; readonly format: string }>())
  )

const toPreview = (input: string | Uint8Array) =>
  Effect.tryPromise(() =>
    sharp(input, { limitInputPixels: maxDecodePixels, failOn: "error", animated: false })
      .rotate()
      .resize({ width: previewWidth, withoutEnlargement: true })
      .webp({ quality: 80 })
      .toBuffer()
  ).pipe(Effect.map((buffer) => new Uint8Array(buffer)), Effect.option)

const bytesResponse = (bytes: Uint8Array, contentType: string) =>
  HttpServerResponse.uint8Array(bytes, {
    contentType,
    headers: { "x-content-type-options": "nosniff", "cache-control": cacheControl, "content-disposition": "inline" }
  })

/**
 * `GET /v1/contacts/{id}/photo` once its signature is checked: the contact's own photo, else the
 * newest linked account's picture (a stored file, or an http(s) URL fetched server-side from a
 * public host). Wider than 256 px and decodable: a WebP preview; otherwise the original.
 */
export class ContactPhotos extends Context.Service<ContactPhotos, {
  serve(companyId: number, contactId: number): Effect.Effect<HttpServerResponse.HttpServerResponse, NotFound>
}>()("crm/contacts/ContactPhotos") {
  static readonly layerNoDeps = Layer.effect(
    ContactPhotos,
    Effect.gen(function*() {
      const repo = yield* ContactsRepo
      const store = yield* BlobStore
      const config = yield* AppConfig
      const imaging = yield* Semaphore.make(2)

      /** A stored image: its kept preview (made once, next to it) when it is wide enough, else the file itself. */
      const stored = Effect.fnUntraced(function*(path: string, mimeType: string | null) {
        if (Option.isNone(yield* store.size(path).pipe(Effect.orDie))) return Option.none()
        const previewPath = `${path}.w${previewWidth}.webp`
        if (Option.isSome(yield* store.size(previewPath).pipe(Effect.orDie))) {
          return Option.some(yield* fileResponse(store, previewPath, { mimeType: "image/webp", fileName: null, cacheControl }))
        }
        const absolute = yield* store.absolute(path).pipe(Effect.orDie)
        const decoded = yield* imaging.withPermits(1)(displayedWidth(absolute))
        if (Option.isSome(decoded) && decoded.value.width > previewWidth) {
          const preview = yield* imaging.withPermits(1)(toPreview(absolute))
          if (Option.isSome(preview)) {
            yield* store.write(previewPath, preview.value).pipe(Effect.orDie)
            return Option.some(bytesResponse(preview.value, "image/webp"))
          }
        }
        const type = mimeType ?? Option.match(decoded, { onNone: () => null, onSome: (d) => formatMime[d.format] ?? null })
        return Option.some(yield* fileResponse(store, path, { mimeType: type, fileName: null, cacheControl }))
      })

      const download = (url: string) =>
        Effect.gen(function*() {
          const parsed = yield* Effect.try(() => new URL(url))
          if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return Option.none<Uint8Array>()
          if (!config.photoFetchAllowPrivate) {
            const host = parsed.hostname.replace(/^\[|\]$/g, "")
            const addresses = isIP(host) !== 0 ? [host] : (yield* Effect.tryPromise(() => lookup(host, { all: true }))).map((a) => a.address)
            if (addresses.length === 0 || addresses.some(isInternal)) return Option.none<Uint8Array>()
          }
          // Redirects are refused: one could point at an internal host after the check above.
          const response = yield* Effect.tryPromise(() =>
            fetch(parsed, { redirect: "error", signal: AbortSignal.timeout(config.providerTimeoutMs) })
          )
          if (!response.ok || response.body === null) return Option.none<Uint8Array>()
          const chunks: Array<Uint8Array> = []
          let size = 0
          const reader = response.body.getReader()
          while (true) {
            const { done, value } = yield* Effect.tryPromise(() => reader.read())
            if (done) break
            size += value.byteLength
            if (size > remoteLimitBytes) {
              yield* Effect.promise(() => reader.cancel())
              return Option.none<Uint8Array>()
            }
            chunks.push(value)
          }
          return Option.some(new Uint8Array(Buffer.concat(chunks)))
        }).pipe(Effect.orElseSucceed(() => Option.none<Uint8Array>()))

      /** A remote picture is served only when it decodes as an image: the route never proxies other content. */
      const remote = Effect.fnUntraced(function*(url: string) {
        const bytes = yield* download(url)
        if (Option.isNone(bytes)) return Option.none()
        const decoded = yield* imaging.withPermits(1)(displayedWidth(bytes.value))
        if (Option.isNone(decoded)) return Option.none()
        if (decoded.value.width > previewWidth) {
          const preview = yield* imaging.withPermits(1)(toPreview(bytes.value))
          if (Option.isSome(preview)) return Option.some(bytesResponse(preview.value, "image/webp"))
        }
        const type = formatMime[decoded.value.format]
        return type === undefined ? Option.none() : Option.some(bytesResponse(bytes.value, type))
      })

      const serve = Effect.fn("ContactPhotos.serve")(function*(companyId: number, contactId: number) {
        const found = yield* repo.find(companyId, contactId)
        if (Option.isNone(found)) return yield* contactNotFound()
        const contact = found.value
        if (contact.photo_path !== null && ownedBy(companyId, contact.photo_path)) {
          const own = yield* stored(contact.photo_path, contact.photo_mime_type)
          if (Option.isSome(own)) return own.value
        }
        for (const picture of contact.pictures) {
          const answer = ownedBy(companyId, picture) ? yield* stored(picture, null) : yield* remote(picture)
          if (Option.isSome(answer)) return answer.value
        }
        return yield* photoNotFound()
      })

      return ContactPhotos.of({ serve })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(ContactsRepo.layer))
}

import { Context, Effect, Layer, Option, Stream } from "effect"
import type { HttpServerResponse, Multipart } from "effect/http"
import { join } from "node:path"
import { CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { type Forbidden, invalidField, type NotFound, notFound, ruleViolation, type Unprocessable } from "../platform/Errors.ts"
import { BlobStore, type BlobTooLarge } from "../platform/files/BlobStore.ts"
import { sniffBytes, sniffMime } from "../platform/files/Sniff.ts"
import { cleanFileName, isThumbnailable, type MediaRow, type MediaType, mediaTypeOf, mimeFromFileName, type NewAttachment, normalizeMime, storageExtension, thumbnailWidths, type Upload, uploadLimitBytes, voiceLimitBytes } from "./Domain.ts"
import { fileResponse } from "../platform/files/FileResponse.ts"
import { Imaging, thumbnailPath, webpOfWidth } from "../platform/files/Imaging.ts"
import { MediaRepo } from "./Repo.ts"
import { acceptsDeclared, Voice } from "./Voice.ts"

/** An attachment row before it has an id, as the messages repo stores it. */
export type ResolvedAttachment = NewAttachment

/** A row of `attachments[]` as the API takes it. */
export interface AttachmentSource {
  readonly media_id?: number | null | undefined
  readonly sticker_id?: number | null | undefined
  readonly type?: string | null | undefined
  readonly file_name?: string | null | undefined
}

export const sourceInvalid = () =>
  ruleViolation("attachment_source_invalid", "The attachment source does not exist or belongs to another company.")

/** The row's `type` may narrow a media file's own type only where the result is still true. */
const allowedTypes: Record<MediaType, ReadonlyArray<string>> = {
  image: ["image", "document"],
  video: ["video", "document"],
  audio: ["audio", "voice", "document"],
  voice: ["voice", "audio", "document"],
  document: ["document"]
}

const kilobytes = (bytes: number) => Math.floor(bytes / 1024)

const tooLarge = (limit: number) => invalidField("file", `The file may not be greater than ${kilobytes(limit)} kilobytes.`)

const multipartFailure = (limit: number) => (e: Multipart.MultipartError) => {
  switch (e.reason._tag) {
    case "FileTooLarge":
    case "BodyTooLarge":
      return Effect.fail(tooLarge(limit))
    case "TooManyParts":
    case "FieldTooLarge":
      return Effect.fail(invalidField("file", "The form has too many or too large fields."))
    case "Parse":
      return Effect.fail(invalidField("file", "The request must be multipart/form-data with a file field."))
    case "InternalError":
      return Effect.die(e)
  }
}

const toUpload = (row: MediaRow): Upload => ({
  media_id: row.id,
  storage_path: row.storage_path,
  type: row.type,
  mime_type: row.mime_type,
  file_name: row.file_name,
  size: row.size
})

interface Received {
  readonly storagePath: string
  readonly size: number
  readonly fileName: string | null
  readonly contentType: string
}

export class Media extends Context.Service<Media, {
  /** `POST /v1/uploads`: the multipart `file` streamed into storage (64 MB). */
  upload(parts: Stream.Stream<Multipart.Part, Multipart.MultipartError>): Effect.Effect<Upload, Forbidden | Unprocessable, CurrentActor>
  /** `POST /v1/uploads/voice`: the multipart `file` (32 MB) transcoded to an Opus voice note. */
  voice(parts: Stream.Stream<Multipart.Part, Multipart.MultipartError>): Effect.Effect<Upload, Forbidden | Unprocessable, CurrentActor>
  /**
   * The media route's answer once its signature is checked: the original, or a kept WebP thumbnail
   * for `w` 256 / 640; ranges, validators and HEAD as `fileResponse` answers them.
   */
  serve(companyId: CompanyId, messageId: number, attachmentId: number, width: string | undefined): Effect.Effect<HttpServerResponse.HttpServerResponse, NotFound>
  /** Attachment rows of a send: each `media_id` / `sticker_id` of the company, else 422 `attachment_source_invalid`. */
  resolve(companyId: number, rows: ReadonlyArray<AttachmentSource>): Effect.Effect<ReadonlyArray<ResolvedAttachment>, Unprocessable>
  /** Keeps fetched provider bytes under the company's attachments; the storage path. */
  keep(companyId: number, bytes: Uint8Array, mimeType: string | null): Effect.Effect<string>
  /** Removes a kept file nothing refers to (a fetch that lost a race). */
  discard(storagePath: string): Effect.Effect<void>
}>()("crm/media/Media") {
  static readonly layerNoDeps = Layer.effect(
    Media,
    Effect.gen(function*() {
      const store = yield* BlobStore
      const repo = yield* MediaRepo
      const voices = yield* Voice
      const imaging = yield* Imaging

      /** The first `file` part streamed into `storagePath`; other parts are drained. */
      const receive = (
        parts: Stream.Stream<Multipart.Part, Multipart.MultipartError>,
        limit: number,
        pathFor: (file: Multipart.File) => Effect.Effect<string, Unprocessable>
      ) =>
        Effect.gen(function*() {
          let received: Received | null = null
          yield* Stream.runForEach(parts, (part): Effect.Effect<void, Unprocessable | Multipart.MultipartError | BlobTooLarge> => {
            if (part._tag !== "File") return Effect.void
            if (part.key !== "file" || received !== null) return Stream.runDrain(part.content)
            return Effect.gen(function*() {
              const storagePath = yield* pathFor(part)
              const { size } = yield* store.writeStream(storagePath, part.content, limit).pipe(
                Effect.catchTag("BlobError", Effect.die)
              )
              received = { storagePath, size, fileName: cleanFileName(part.name), contentType: part.contentType }
            })
          }).pipe(
            Effect.catchTag("MultipartError", multipartFailure(limit)),
            Effect.catchTag("BlobTooLarge", () => Effect.fail(tooLarge(limit))),
            Effect.onError(() => received === null ? Effect.void : store.remove((received as Received).storagePath).pipe(Effect.ignore))
          )
          const file = received as Received | null
          if (file === null) return yield* invalidField("file", "The file field is required.")
          if (file.size === 0) {
            yield* store.remove(file.storagePath).pipe(Effect.ignore)
            return yield* invalidField("file", "The file must not be empty.")
          }
          return file
        })

      const mimeOf = (contentType: string, fileName: string | null) => {
        const declared = normalizeMime(contentType)
        return declared !== null && declared !== "application/octet-stream"
          ? declared
          : mimeFromFileName(fileName) ?? declared ?? "application/octet-stream"
      }

      const upload = Effect.fn("Media.upload")(function*(parts: Stream.Stream<Multipart.Part, Multipart.MultipartError>) {
        const company = yield* requirePermission("conversation.view")
        const actor = yield* CurrentActor
        const file = yield* receive(parts, uploadLimitBytes, (part) =>
          Effect.succeed(store.newPath(company.id, "uploads", storageExtension(mimeOf(part.contentType, cleanFileName(part.name))))))
        const head = yield* Stream.runCollect(store.read(file.storagePath, { start: 0, end: Math.min(file.size, sniffBytes) - 1 })).pipe(
          Effect.map((chunks) => Buffer.concat(Array.from(chunks))),
          Effect.orDie
        )
        const mimeType = yield* sniffMime(head, mimeOf(file.contentType, file.fileName))
        const row = yield* repo.insert(company.id, {
          userId: actor.userId,
          type: mediaTypeOf(mimeType),
          mimeType,
          fileName: file.fileName,
          size: file.size,
          storagePath: file.storagePath,
          durationSeconds: null
        }).pipe(Effect.onError(() => store.remove(file.storagePath).pipe(Effect.ignore)))
        return toUpload(row)
      })

      const voice = Effect.fn("Media.voice")(function*(parts: Stream.Stream<Multipart.Part, Multipart.MultipartError>) {
        const company = yield* requirePermission("conversation.view")
        const actor = yield* CurrentActor
        const input = yield* receive(parts, voiceLimitBytes, (part) =>
          Option.match(acceptsDeclared(part.name, part.contentType), {
            onNone: () => Effect.succeed(store.newPath(company.id, "incoming", "")),
            onSome: (message) => Effect.fail(invalidField("file", message))
          }))
        return yield* Effect.gen(function*() {
          const source = yield* store.absolute(input.storagePath).pipe(Effect.orDie)
          const scratch = yield* store.scratchDir.pipe(Effect.orDie)
          const output = join(scratch, "voice.ogg")
          const { duration } = yield* voices.transcode(source, output).pipe(
            Effect.catchTag("VoiceRejected", (e) => Effect.fail(invalidField("file", e.message)))
          )
          const storagePath = store.newPath(company.id, "voice", ".ogg")
          yield* store.moveIn(output, storagePath).pipe(Effect.orDie)
          const size = Option.getOrElse(yield* store.size(storagePath).pipe(Effect.orDie), () => 0)
          const base = input.fileName?.replace(/\.[^.]*$/, "") ?? "voice"
          const row = yield* repo.insert(company.id, {
            userId: actor.userId,
            type: "voice",
            mimeType: "audio/ogg",
            fileName: `${base === "" ? "voice" : base}.ogg`,
            size,
            storagePath,
            durationSeconds: duration
          })
          return { ...toUpload(row), duration: row.duration_seconds }
        }).pipe(
          Effect.scoped,
          Effect.ensuring(store.remove(input.storagePath).pipe(Effect.ignore))
        )
      })

      /** A kept WebP thumbnail of `width`, made on first request; None when the image cannot be decoded within the limits. */
      const thumbnail = (storagePath: string, width: number) =>
        Effect.gen(function*() {
          const path = thumbnailPath(storagePath, width)
          if (Option.isSome(yield* store.size(path))) return Option.some(path)
          const source = yield* store.absolute(storagePath)
          const made = yield* imaging.run(webpOfWidth(source, width)).pipe(Effect.option)
          if (Option.isNone(made)) {
            yield* Effect.logInfo("thumbnail not made", { storage_path: storagePath, width })
            return Option.none<string>()
          }
          yield* store.write(path, made.value)
          return Option.some(path)
        }).pipe(Effect.orDie)

      const serve = Effect.fn("Media.serve")(function*(companyId: CompanyId, messageId: number, attachmentId: number, width: string | undefined) {
        const found = yield* repo.attachmentFile(companyId, messageId, attachmentId)
        if (Option.isNone(found) || found.value.storage_path === null) return yield* notFound("File not found.")
        const file = found.value
        const storagePath = file.storage_path!
        const w = thumbnailWidths.find((candidate) => String(candidate) === width)
        if (w !== undefined && isThumbnailable(file.mime_type)) {
          const thumb = yield* thumbnail(storagePath, w)
          if (Option.isSome(thumb)) {
            const name = file.file_name === null ? null : `${file.file_name.replace(/\.[^.]*$/, "")}-${w}.webp`
            return yield* fileResponse(store, thumb.value, { mimeType: "image/webp", fileName: name })
          }
        }
        return yield* fileResponse(store, storagePath, { mimeType: file.mime_type, fileName: file.file_name })
      })

      const present = <A>(value: A | null | undefined): value is A => value !== null && value !== undefined

      const resolve = Effect.fn("Media.resolve")(function*(company: number, rows: ReadonlyArray<AttachmentSource>) {
        const companyId = CompanyId.make(company)
        const mediaIds = rows.map((r) => r.media_id).filter(present)
        const stickerIds = rows.map((r) => r.sticker_id).filter(present)
        const [media, stickers] = yield* Effect.all([repo.find(companyId, mediaIds), repo.stickers(companyId, stickerIds)], {
          concurrency: 2
        })
        const out: Array<ResolvedAttachment> = []
        for (const [i, row] of rows.entries()) {
          if (present(row.media_id)) {
            const m = media.get(row.media_id)
            if (m === undefined) return yield* sourceInvalid()
            const type = row.type ?? m.type
            if (!allowedTypes[m.type].includes(type)) {
              return yield* invalidField(`attachments.${i}.type`, `A ${m.type} file cannot be sent as ${type}.`)
            }
            out.push({
              type,
              mime_type: m.mime_type,
              url: null,
              thumbnail_url: null,
              storage_path: m.storage_path,
              media_id: m.id,
              sticker_id: null,
              file_name: row.file_name ?? m.file_name,
              size: m.size
            })
          } else {
            const s = stickers.get(row.sticker_id!)
            if (s === undefined) return yield* sourceInvalid()
            // A copy: deleting the sticker from the library must not take it out of sent messages.
            const storagePath = store.newPath(companyId, "attachments", storageExtension(s.mime_type))
            yield* Effect.flatMap(store.readBytes(s.storage_path), (bytes) => store.write(storagePath, bytes)).pipe(
              Effect.catchTag("BlobError", () => sourceInvalid())
            )
            out.push({
              type: "sticker",
              mime_type: s.mime_type,
              url: null,
              thumbnail_url: null,
              storage_path: storagePath,
              media_id: null,
              sticker_id: s.id,
              file_name: "sticker.webp",
              size: s.size
            })
          }
        }
        return out
      })

      const keep = Effect.fn("Media.keep")(function*(companyId: number, bytes: Uint8Array, mimeType: string | null) {
        const path = store.newPath(companyId, "attachments", mimeType === null ? "" : storageExtension(mimeType))
        yield* store.write(path, bytes).pipe(Effect.orDie)
        return path
      })

      const discard = (storagePath: string) => Effect.ignore(store.remove(storagePath))

      return Media.of({ upload, voice, serve, resolve, keep, discard })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([MediaRepo.layer, Voice.layer]))
}

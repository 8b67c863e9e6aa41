import { Context, Effect, Layer, Option, Stream } from "effect"
import type { HttpServerResponse, Multipart } from "effect/http"
import { SqlClient } from "effect/sql"
import { type CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { BlobStore, ownedBy } from "../platform/files/BlobStore.ts"
import { fileResponse } from "../platform/files/FileResponse.ts"
import { Imaging } from "../platform/files/Imaging.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import { type Forbidden, forbidden, invalidField, type NotFound, notFound, Unprocessable } from "../platform/Errors.ts"
import { ChannelAccess } from "../auth/ChannelAccess.ts"
import { convertToSticker, type ConvertedSticker, isWebp, StickerImageRejected } from "./Convert.ts"
import {
  type CreatePack,
  type FromMessage,
  maxFilesPerUpload,
  maxInputBytes,
  maxUploadBytes,
  type Skipped,
  type Sticker,
  type StickerPack,
  type UpdatePack,
  type UpdateSticker
} from "./Domain.ts"
import { type PackRow, type StickerRow, StickersRepo } from "./Repo.ts"

export const packNotFound = () => notFound("Sticker pack not found.")
export const stickerNotFound = () => notFound("Sticker not found.")

export const stickerFilePath = (stickerId: number) => `/v1/stickers/${stickerId}/file`

type Parts = Stream.Stream<Multipart.Part, Multipart.MultipartError>

const filesRequired = () => invalidField("files", "The files field is required.")
const tooManyFiles = () => invalidField("files", `The files field must not have more than ${maxFilesPerUpload} items.`)

/** Reads one file part, keeping at most `maxInputBytes`; a bigger file is drained and answered with null. */
const readCapped = (content: Stream.Stream<Uint8Array, Multipart.MultipartError>) =>
  Effect.map(
    Stream.runFold(content, () => ({ chunks: new Array<Uint8Array>(), size: 0 }), (acc, chunk) => {
      acc.size += chunk.byteLength
      if (acc.size <= maxInputBytes) acc.chunks.push(chunk)
      return acc
    }),
    (acc) => (acc.size > maxInputBytes ? null : new Uint8Array(Buffer.concat(acc.chunks)))
  )

const multipartFailure = (error: Multipart.MultipartError) => {
  switch (error.reason._tag) {
    case "TooManyParts":
      return tooManyFiles()
    case "BodyTooLarge":
      return invalidField("files", `The upload must not be greater than ${Math.floor(maxUploadBytes / 1024 / 1024)} MB in total.`)
    default:
      return invalidField("files", "The multipart body could not be read.")
  }
}

/** Everything but the sticker's own id and url: an upload's or a chat's sticker, ready to store. */
export interface Prepared {
  readonly converted: ConvertedSticker
  readonly originalName: string | null
  readonly emojiTags: ReadonlyArray<string>
  readonly sourceMessageId: number | null
}

type Denied = Forbidden | NotFound

export class Stickers extends Context.Service<Stickers, {
  readonly list: Effect.Effect<ReadonlyArray<StickerPack>, Forbidden, CurrentActor>
  createPack(input: CreatePack): Effect.Effect<StickerPack, Forbidden, CurrentActor>
  updatePack(packId: number, input: UpdatePack): Effect.Effect<StickerPack, Denied, CurrentActor>
  deletePack(packId: number): Effect.Effect<void, Denied, CurrentActor>
  /** `parts` is None when the body is not multipart. */
  upload(packId: number, parts: Option.Option<Parts>): Effect.Effect<
    { readonly created: ReadonlyArray<Sticker>; readonly skipped: ReadonlyArray<Skipped> },
    Denied | Unprocessable,
    CurrentActor
  >
  /** Into `packId`, or the system pack (made on first use) when null. */
  fromMessage(packId: number | null, input: FromMessage): Effect.Effect<
    { readonly pack_id: number; readonly item: Sticker },
    Denied | Unprocessable,
    CurrentActor
  >
  updateSticker(stickerId: number, input: UpdateSticker): Effect.Effect<Sticker, Denied | Unprocessable, CurrentActor>
  deleteSticker(stickerId: number): Effect.Effect<void, Denied, CurrentActor>
  /** The file behind a signed link (the caller has checked the signature, which covers `company`), ranges and validators included. */
  file(companyId: CompanyId, stickerId: number): Effect.Effect<HttpServerResponse.HttpServerResponse, NotFound>
  /** The conversion pipeline, within the runner's imaging permits. */
  convert(bytes: Uint8Array): Effect.Effect<ConvertedSticker, StickerImageRejected>
  /** A stored sticker as the API shows it. */
  view(row: StickerRow): Sticker
  /** Writes the file and the row of a converted sticker (append to the pack). */
  store(companyId: CompanyId, packId: number, sticker: Prepared): Effect.Effect<StickerRow>
}>()("crm/stickers/Stickers") {
  static readonly layerNoDeps = Layer.effect(
    Stickers,
    Effect.gen(function*() {
      const repo = yield* StickersRepo
      const blobs = yield* BlobStore
      const signed = yield* SignedUrls
      const access = yield* ChannelAccess
      const sql = yield* SqlClient.SqlClient
      const imaging = yield* Imaging

      const convert = (bytes: Uint8Array) => imaging.run(convertToSticker(bytes))

      const view = (row: StickerRow): Sticker => ({
        id: row.id,
        pack_id: row.pack_id,
        url: signed.sign(stickerFilePath(row.id), { params: { c: String(row.company_id) } }),
        width: row.width,
        height: row.height,
        size: row.size,
        is_animated: row.is_animated,
        emoji_tags: row.emoji_tags,
        position: row.position
      })

      const packView = (pack: PackRow, stickers: ReadonlyArray<StickerRow>): StickerPack => ({
        id: pack.id,
        name: pack.name,
        is_system: pack.is_system,
        source: pack.source,
        tray_emoji: pack.tray_emoji,
        position: pack.position,
        stickers_count: stickers.length,
        stickers: stickers.map(view)
      })

      const withStickers = (companyId: CompanyId, packs: ReadonlyArray<PackRow>) =>
        Effect.map(repo.stickersOf(companyId, packs.map((p) => p.id)), (rows) => {
          const byPack = new Map<number, Array<StickerRow>>()
          for (const row of rows) {
            const list = byPack.get(row.pack_id)
            if (list === undefined) byPack.set(row.pack_id, [row])
            else list.push(row)
          }
          return packs.map((pack) => packView(pack, byPack.get(pack.id) ?? []))
        })

      const livePack = Effect.fnUntraced(function*(companyId: CompanyId, packId: number) {
        const pack = yield* repo.findPack(companyId, packId)
        if (Option.isNone(pack)) return yield* packNotFound()
        return pack.value
      })

      const store = Effect.fnUntraced(function*(companyId: CompanyId, packId: number, sticker: Prepared) {
        const path = blobs.newPath(companyId, "stickers", ".webp")
        yield* blobs.write(path, sticker.converted.bytes).pipe(Effect.orDie)
        return yield* repo.insertSticker(companyId, packId, {
          storage_path: path,
          width: sticker.converted.width,
          height: sticker.converted.height,
          size: sticker.converted.size,
          emoji_tags: sticker.emojiTags,
          original_name: sticker.originalName,
          source_message_id: sticker.sourceMessageId
        })
      })

      const list = Effect.gen(function*() {
        const company = yield* requirePermission("sticker.view")
        return yield* withStickers(company.id, yield* repo.listPacks(company.id))
      }).pipe(Effect.withSpan("Stickers.list"))

      const createPack = Effect.fn("Stickers.createPack")(function*(input: CreatePack) {
        const company = yield* requirePermission("sticker.create")
        const pack = yield* repo.insertPack(company.id, {
          name: input.name.trim(),
          tray_emoji: input.tray_emoji ?? null,
          source: "manual",
          source_name: null
        })
        return packView(pack, [])
      })

      const updatePack = Effect.fn("Stickers.updatePack")(function*(packId: number, input: UpdatePack) {
        const company = yield* requirePermission("sticker.update")
        const updated = yield* repo.updatePack(company.id, packId, {
          name: input.name?.trim(),
          tray_emoji: input.tray_emoji,
          position: input.position
        })
        if (Option.isNone(updated)) return yield* packNotFound()
        return (yield* withStickers(company.id, [updated.value]))[0]
      })

      const deletePack = Effect.fn("Stickers.deletePack")(function*(packId: number) {
        const company = yield* requirePermission("sticker.delete")
        if (!(yield* repo.deletePack(company.id, packId))) return yield* packNotFound()
      })

      const upload = Effect.fn("Stickers.upload")(function*(packId: number, parts: Option.Option<Parts>) {
        const company = yield* requirePermission("sticker.create")
        yield* livePack(company.id, packId)
        if (Option.isNone(parts)) return yield* filesRequired()
        const converted: Array<Prepared> = []
        const skipped: Array<Skipped> = []
        let files = 0
        yield* Stream.runForEach(parts.value, (part): Effect.Effect<void, Unprocessable | Multipart.MultipartError> => {
          if (part._tag !== "File") return Effect.void
          if (part.key !== "files[]" && part.key !== "files") return Stream.runDrain(part.content)
          files += 1
          if (files > maxFilesPerUpload) return Effect.fail(tooManyFiles())
          const filename = part.name.slice(0, 255)
          return Effect.flatMap(readCapped(part.content), (bytes) => {
            const result: Effect.Effect<ConvertedSticker, StickerImageRejected> = bytes === null
              ? Effect.fail(new StickerImageRejected({ reason: "file_too_large", message: "The file is larger than 5 MB." }))
              : convert(bytes)
            return Effect.match(result, {
              onFailure: (e) => {
                skipped.push({ filename, reason: e.reason })
              },
              onSuccess: (sticker) => {
                converted.push({ converted: sticker, originalName: filename, emojiTags: [], sourceMessageId: null })
              }
            })
          })
        }).pipe(Effect.catchTag("MultipartError", (e) => Effect.fail(multipartFailure(e))))
        if (files === 0) return yield* filesRequired()
        const created = yield* Effect.forEach(converted, (sticker) => store(company.id, packId, sticker)).pipe(
          sql.withTransaction,
          Effect.orDie
        )
        return { created: created.map(view), skipped }
      })

      const fromMessage = Effect.fn("Stickers.fromMessage")(function*(packId: number | null, input: FromMessage) {
        const company = yield* requirePermission("sticker.create")
        const actor = yield* CurrentActor
        if (packId !== null) yield* livePack(company.id, packId)
        const source = yield* repo.attachmentSource(company.id, input.message_id, input.attachment_id)
        if (Option.isNone(source)) {
          return yield* invalidField("message_id", "The selected message id is invalid.")
        }
        if (!(yield* access.canSee(company.id, actor, source.value.channel_id))) {
          return yield* forbidden("You do not have access to this conversation.")
        }
        if (source.value.attachment_id === null) {
          return yield* invalidField("attachment_id", "The selected attachment id is invalid.")
        }
        const path = source.value.storage_path
        if (path === null || !ownedBy(company.id, path)) {
          return yield* new Unprocessable({
            message: "The attachment's file is not stored yet; fetch the attachment first.",
            error_code: "attachment_not_stored"
          })
        }
        const bytes = yield* blobs.readBytes(path).pipe(Effect.orDie)
        if (!isWebp(bytes)) {
          return yield* new Unprocessable({
            message: "The attachment is not a WebP sticker.",
            errors: { attachment_id: ["The attachment is not a WebP sticker."] },
            error_code: "sticker_not_webp"
          })
        }
        const converted = yield* convert(bytes).pipe(
          Effect.mapError((e) => invalidField("attachment_id", e.message))
        )
        const row = yield* Effect.gen(function*() {
          const target = packId ?? (yield* repo.systemPack(company.id)).id
          return yield* store(company.id, target, { converted, originalName: null, emojiTags: [], sourceMessageId: input.message_id })
        }).pipe(sql.withTransaction, Effect.orDie)
        return { pack_id: row.pack_id, item: view(row) }
      })

      const updateSticker = Effect.fn("Stickers.updateSticker")(function*(stickerId: number, input: UpdateSticker) {
        const company = yield* requirePermission("sticker.update")
        if (Option.isNone(yield* repo.findSticker(company.id, stickerId))) return yield* stickerNotFound()
        if (input.sticker_pack_id !== undefined && Option.isNone(yield* repo.findPack(company.id, input.sticker_pack_id))) {
          return yield* invalidField("sticker_pack_id", "The selected sticker pack id is invalid.")
        }
        const updated = yield* repo.updateSticker(company.id, stickerId, {
          emoji_tags: input.emoji_tags,
          position: input.position,
          pack_id: input.sticker_pack_id
        })
        if (Option.isNone(updated)) return yield* stickerNotFound()
        return view(updated.value)
      })

      const deleteSticker = Effect.fn("Stickers.deleteSticker")(function*(stickerId: number) {
        const company = yield* requirePermission("sticker.delete")
        if (Option.isNone(yield* repo.findSticker(company.id, stickerId))) return yield* stickerNotFound()
        if (!(yield* repo.deleteSticker(company.id, stickerId))) return yield* stickerNotFound()
      })

      const file = Effect.fn("Stickers.file")(function*(companyId: CompanyId, stickerId: number) {
        const row = yield* repo.findSticker(companyId, stickerId)
        if (Option.isNone(row)) return yield* stickerNotFound()
        return yield* fileResponse(blobs, row.value.storage_path, { mimeType: "image/webp", fileName: null }).pipe(
          Effect.catch(() => stickerNotFound())
        )
      })

      return Stickers.of({
        list,
        createPack,
        updatePack,
        deletePack,
        upload,
        fromMessage,
        updateSticker,
        deleteSticker,
        file,
        convert,
        view,
        store
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(StickersRepo.layer))
}

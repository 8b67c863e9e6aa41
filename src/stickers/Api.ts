import { Schema } from "effect"
import { Multipart } from "effect/http"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, BadGateway, NotFound, Unprocessable } from "../platform/Errors.ts"
import {
  CreatePack,
  FromMessage,
  ImportQueued,
  ImportTelegram,
  maxUploadBytes,
  Skipped,
  Sticker,
  StickerId,
  StickerPack,
  StickerPackId,
  UpdatePack,
  UpdateSticker
} from "./Domain.ts"
import { SignedRouteErrors, signedQuery } from "../platform/files/SignedQuery.ts"

const PackParams = { pack: StickerPackId }
const StickerParams = { sticker: StickerId }
const Message = Data(Schema.Struct({ message: Schema.String }))
const PackAnswer = Data(Schema.Struct({ message: Schema.String, pack: StickerPack }))
const SavedAnswer = Data(Schema.Struct({ message: Schema.String, pack_id: StickerPackId, item: Sticker }))
  .pipe(HttpApiSchema.status(201))

// Oversized files are drained and reported in `skipped`, so there is no per-file parser limit, only the total.
const Files = Schema.Struct({ "files[]": Multipart.FilesSchema }).pipe(HttpApiSchema.asMultipartStream({
  maxParts: 130,
  maxFieldSize: 64 * 1024,
  maxTotalSize: maxUploadBytes
}))

/** A JSON body is answered 422 on `files` (not 415 text), like any other malformed request. */
const NotAForm = Schema.Struct({ files: Schema.Never })

export class StickersApi extends HttpApiGroup.make("stickers")
  .add(
    HttpApiEndpoint.get("list", "/v1/sticker-packs", {
      success: Data(Schema.Array(StickerPack)),
      error: AuthErrors
    }),
    HttpApiEndpoint.post("createPack", "/v1/sticker-packs", {
      payload: CreatePack,
      success: PackAnswer.pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.post("fromMessage", "/v1/sticker-packs/stickers/from-message", {
      payload: FromMessage,
      success: SavedAnswer,
      error: [...AuthErrors, NotFound, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Saves a chat sticker (a stored attachment that is a real WebP by its bytes) into the system pack, " +
        "made on first use. 422 for a foreign or missing message or attachment, 403 without access to its conversation."
    })),
    HttpApiEndpoint.post("importTelegram", "/v1/sticker-packs/import/telegram", {
      payload: ImportTelegram,
      success: Data(ImportQueued).pipe(HttpApiSchema.status(202)),
      error: [...AuthErrors, Unprocessable, BadGateway]
    }).annotateMerge(OpenApi.annotations({
      description: "Queues the import of a Telegram sticker set (`https://t.me/addstickers/<name>` or the bare name) through " +
        "a connected `msgr_b` Telegram channel's bot. Animated and video stickers are skipped, at most 120 static ones " +
        "are kept; the outcome arrives as the `sticker.pack.import.finished` event."
    })),
    HttpApiEndpoint.post("updatePack", "/v1/sticker-packs/:pack", {
      params: PackParams,
      payload: UpdatePack,
      success: PackAnswer,
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.delete("deletePack", "/v1/sticker-packs/:pack", {
      params: PackParams,
      success: Message,
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.post("upload", "/v1/sticker-packs/:pack/stickers", {
      params: PackParams,
      payload: [Files, NotAForm],
      success: Data(Schema.Struct({ created: Schema.Array(Sticker), skipped: Schema.Array(Skipped) })),
      error: [...AuthErrors, NotFound, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Multipart `files[]`: 1-120 PNG, JPEG or WebP files of up to 5 MB, each converted to a static 512x512 WebP " +
        "(under 100 KB). A file that cannot be used lands in `skipped` with its reason (`unsupported_format`, " +
        "`file_too_large`, `too_many_pixels`, `unreadable_image`, `output_too_large`); the others are kept."
    })),
    HttpApiEndpoint.post("fromMessageInto", "/v1/sticker-packs/:pack/stickers/from-message", {
      params: PackParams,
      payload: FromMessage,
      success: SavedAnswer,
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.patch("updateSticker", "/v1/stickers/:sticker", {
      params: StickerParams,
      payload: UpdateSticker,
      success: Data(Schema.Struct({ message: Schema.String, sticker: Sticker })),
      error: [...AuthErrors, NotFound, Unprocessable]
    }),
    HttpApiEndpoint.delete("deleteSticker", "/v1/stickers/:sticker", {
      params: StickerParams,
      success: Message,
      error: [...AuthErrors, NotFound]
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Stickers",
    description: "The company's library of static stickers: packs with their stickers, uploads, stickers saved from chats, " +
      "and Telegram set imports. Agents may view and add; renaming, moving and deleting need sticker.update / sticker.delete."
  }))
{}

/** Signed public route: the signature in the query is the authorization. */
export class StickerFilesApi extends HttpApiGroup.make("stickerFiles")
  .add(
    HttpApiEndpoint.get("file", "/v1/stickers/:sticker/file", {
      params: StickerParams,
      query: signedQuery,
      success: Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "image/webp" })),
      error: SignedRouteErrors
    }).annotateMerge(OpenApi.annotations({
      description: "The sticker's WebP bytes. Permanent signed link (no Authorization header), revoked by deleting the " +
        "sticker or rotating the platform's signing key; 2000 requests a minute per IP."
    }))
  )
  .annotateMerge(OpenApi.annotations({ title: "Sticker files" }))
{}

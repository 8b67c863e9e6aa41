import { Effect, Option, Stream } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import { signedCompany } from "../platform/files/SignedQuery.ts"
import { StickerImports } from "./Imports.ts"
import { stickerNotFound, Stickers } from "./Stickers.ts"

export const StickersHttp = HttpApiBuilder.group(Api, "stickers", Effect.fn(function*(handlers) {
  const stickers = yield* Stickers
  const imports = yield* StickerImports
  return handlers
    .handle("list", () => Effect.map(stickers.list, (data) => ({ data })))
    .handle("createPack", ({ payload }) => Effect.map(stickers.createPack(payload), (pack) => ({ data: { message: "Sticker pack created.", pack } })))
    .handle("updatePack", ({ params, payload }) =>
      Effect.map(stickers.updatePack(params.pack, payload), (pack) => ({ data: { message: "Sticker pack updated.", pack } })))
    .handle("deletePack", ({ params }) => Effect.as(stickers.deletePack(params.pack), { data: { message: "Sticker pack deleted." } }))
    .handle("upload", ({ params, payload }) =>
      Effect.map(stickers.upload(params.pack, Stream.isStream(payload) ? Option.some(payload) : Option.none()), (data) => ({ data })))
    .handle("fromMessage", ({ payload }) =>
      Effect.map(stickers.fromMessage(null, payload), (saved) => ({ data: { message: "Sticker saved.", ...saved } })))
    .handle("fromMessageInto", ({ params, payload }) =>
      Effect.map(stickers.fromMessage(params.pack, payload), (saved) => ({ data: { message: "Sticker saved.", ...saved } })))
    .handle("importTelegram", ({ payload }) => Effect.map(imports.queue(payload), (data) => ({ data })))
    .handle("updateSticker", ({ params, payload }) =>
      Effect.map(stickers.updateSticker(params.sticker, payload), (sticker) => ({ data: { message: "Sticker updated.", sticker } })))
    .handle("deleteSticker", ({ params }) => Effect.as(stickers.deleteSticker(params.sticker), { data: { message: "Sticker deleted." } }))
}))

export const StickerFilesHttp = HttpApiBuilder.group(Api, "stickerFiles", Effect.fn(function*(handlers) {
  const stickers = yield* Stickers
  const signed = yield* SignedUrls
  return handlers.handle("file", ({ params, query }) =>
    Effect.gen(function*() {
      yield* signed.authorize
      const company = signedCompany(query.c)
      if (Option.isNone(company)) return yield* stickerNotFound()
      return yield* stickers.file(company.value, params.sticker)
    }))
}))

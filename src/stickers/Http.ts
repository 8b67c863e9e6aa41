import { Effect, Layer, Option, Stream } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { CompanyId } from "../auth/Domain.ts"
import { data } from "../platform/Envelope.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import { signedCompany } from "../platform/files/SignedQuery.ts"
import { StickerImports } from "./Imports.ts"
import { stickerNotFound, Stickers } from "./Stickers.ts"

export const StickersHttp = HttpApiBuilder.group(Api, "stickers", Effect.fn(function*(handlers) {
  const stickers = yield* Stickers
  const imports = yield* StickerImports
  return handlers
    .handle("list", () => data(stickers.list))
    .handle("createPack", ({ payload }) => data(Effect.map(stickers.createPack(payload), (pack) => ({ message: "Sticker pack created.", pack }))))
    .handle("updatePack", ({ params, payload }) =>
      data(Effect.map(stickers.updatePack(params.pack, payload), (pack) => ({ message: "Sticker pack updated.", pack }))))
    .handle("deletePack", ({ params }) => Effect.as(stickers.deletePack(params.pack), { data: { message: "Sticker pack deleted." } }))
    .handle("upload", ({ params, payload }) =>
      data(stickers.upload(params.pack, Stream.isStream(payload) ? Option.some(payload) : Option.none())))
    .handle("fromMessage", ({ payload }) =>
      data(Effect.map(stickers.fromMessage(null, payload), (saved) => ({ message: "Sticker saved.", ...saved }))))
    .handle("fromMessageInto", ({ params, payload }) =>
      data(Effect.map(stickers.fromMessage(params.pack, payload), (saved) => ({ message: "Sticker saved.", ...saved }))))
    .handle("importTelegram", ({ payload }) => data(imports.queue(payload)))
    .handle("updateSticker", ({ params, payload }) =>
      data(Effect.map(stickers.updateSticker(params.sticker, payload), (sticker) => ({ message: "Sticker updated.", sticker }))))
    .handle("deleteSticker", ({ params }) => Effect.as(stickers.deleteSticker(params.sticker), { data: { message: "Sticker deleted." } }))
})).pipe(Layer.provide([StickerImports.layer, Stickers.layer]))

export const StickerFilesHttp = HttpApiBuilder.group(Api, "stickerFiles", Effect.fn(function*(handlers) {
  const stickers = yield* Stickers
  const signed = yield* SignedUrls
  return handlers.handle("file", ({ params, query }) =>
    Effect.gen(function*() {
      yield* signed.authorize
      const company = signedCompany(query.c)
      if (Option.isNone(company)) return yield* stickerNotFound()
      return yield* stickers.file(CompanyId.make(company.value), params.sticker)
    }))
})).pipe(Layer.provide(Stickers.layer))

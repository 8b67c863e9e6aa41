import { Effect, Layer, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { CompanyId } from "../auth/Domain.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import { signedCompany } from "../platform/files/SignedQuery.ts"
import { notFound } from "../platform/Errors.ts"
import { UserPhotos } from "./Photos.ts"

export const UserPhotosHttp = HttpApiBuilder.group(Api, "userPhotos", Effect.fn(function*(handlers) {
  const photos = yield* UserPhotos
  const signed = yield* SignedUrls
  return handlers.handle("photo", ({ params, query }) =>
    Effect.gen(function*() {
      yield* signed.authorize
      const company = signedCompany(query.c)
      if (Option.isNone(company)) return yield* notFound("Photo not found.")
      return yield* photos.serve(CompanyId.make(company.value), params.user)
    }))
})).pipe(Layer.provide(UserPhotos.layer))

import { Effect, Layer, Option, Stream } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { CompanyId } from "../auth/Domain.ts"
import { invalidField, notFound } from "../platform/Errors.ts"
import { Media } from "./Media.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import { signedCompany } from "../platform/files/SignedQuery.ts"

const notAForm = () => Effect.fail(invalidField("file", "The request must be multipart/form-data with a file field."))

export const UploadsHttp = HttpApiBuilder.group(Api, "uploads", Effect.fn(function*(handlers) {
  const media = yield* Media
  return handlers
    .handle("upload", ({ payload }) => Stream.isStream(payload) ? media.upload(payload) : notAForm())
    .handle("voice", ({ payload }) => Stream.isStream(payload) ? media.voice(payload) : notAForm())
})).pipe(Layer.provide(Media.layer))

export const SignedMediaHttp = HttpApiBuilder.group(Api, "signedMedia", Effect.fn(function*(handlers) {
  const media = yield* Media
  const signed = yield* SignedUrls
  return handlers.handle("attachmentMedia", ({ params, query }) =>
    Effect.gen(function*() {
      yield* signed.authorize
      const company = signedCompany(query.c)
      if (Option.isNone(company)) return yield* notFound("File not found.")
      return yield* media.serve(CompanyId.make(company.value), params.id, params.attachment, query.w)
    }))
})).pipe(Layer.provide(Media.layer))

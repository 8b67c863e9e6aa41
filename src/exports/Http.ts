import { Effect, Layer, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { CompanyId } from "../auth/Domain.ts"
import { data } from "../platform/Envelope.ts"
import { notFound } from "../platform/Errors.ts"
import { signedCompany } from "../platform/files/SignedQuery.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import { Exports } from "./Exports.ts"

export const ExportsHttp = HttpApiBuilder.group(Api, "exports", Effect.fn(function*(handlers) {
  const exports = yield* Exports
  return handlers
    .handle("list", ({ query }) => data(exports.list(query.page ?? 1, query.perPage ?? 20)))
    .handle("create", ({ payload }) =>
      data(Effect.map(exports.create(payload), (created) => ({ message: "Export queued.", export: created }))))
    .handle("get", ({ params }) => data(Effect.map(exports.get(params.export), (found) => ({ export: found }))))
    .handle("download", ({ params }) => exports.download(params.export))
    .handle("delete", ({ params }) => Effect.as(exports.delete(params.export), { data: { message: "Export deleted." } }))
})).pipe(Layer.provide(Exports.layer))

export const ExportFilesHttp = HttpApiBuilder.group(Api, "exportFiles", Effect.fn(function*(handlers) {
  const exports = yield* Exports
  const signed = yield* SignedUrls
  return handlers.handle("file", ({ params, query }) =>
    Effect.gen(function*() {
      yield* signed.authorize
      const company = signedCompany(query.c)
      if (Option.isNone(company)) return yield* notFound("The export file is not available.")
      return yield* exports.signedFile(CompanyId.make(company.value), params.export)
    }))
})).pipe(Layer.provide(Exports.layer))

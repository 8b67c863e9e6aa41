import type { CompanyId } from "../auth/Domain.ts"
import { Context, Effect, Layer, Option } from "effect"
import type { HttpServerResponse } from "effect/http"
import { PhotoFiles } from "../media/PhotoFiles.ts"
import { type NotFound, notFound } from "../platform/Errors.ts"
import { UsersRepo } from "./Repo.ts"

const photoNotFound = () => notFound("Photo not found.")

/**
 * `GET /v1/users/{user}/photo` once its signature is checked. The membership is checked on every
 * request, so a link made for a company stops working when the user leaves it.
 */
export class UserPhotos extends Context.Service<UserPhotos, {
  serve(companyId: CompanyId, userId: number): Effect.Effect<HttpServerResponse.HttpServerResponse, NotFound>
}>()("crm/users/UserPhotos") {
  static readonly layerNoDeps = Layer.effect(
    UserPhotos,
    Effect.gen(function*() {
      const repo = yield* UsersRepo
      const files = yield* PhotoFiles

      const serve = Effect.fn("UserPhotos.serve")(function*(companyId: CompanyId, userId: number) {
        const found = yield* repo.photo(companyId, userId)
        if (Option.isNone(found)) return yield* photoNotFound()
        // The upload stays in the namespace of the company it was made in: a user's photo is theirs in every company.
        const answer = yield* files.stored(found.value.photo_path, found.value.photo_mime_type)
        if (Option.isNone(answer)) return yield* photoNotFound()
        return answer.value
      })

      return UserPhotos.of({ serve })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([UsersRepo.layer, PhotoFiles.layer]))
}

import { Context, Effect, Layer, Option } from "effect"
import { type CurrentActor, requirePermission } from "../auth/Domain.ts"
import { type Forbidden, invalidField, type NotFound, notFound, type Unprocessable, orNotFound } from "../platform/Errors.ts"
import type { Tag, TagInput } from "./Domain.ts"
import { TagsRepo } from "./Repo.ts"

const tagNotFound = () => notFound("Tag not found.")
const nameTaken = () => invalidField("name", "The name has already been taken.")

/** The company's tag catalog (the ids that `POST /v1/contacts/{id}/tags` takes). */
export class Tags extends Context.Service<Tags, {
  readonly list: Effect.Effect<ReadonlyArray<Tag>, Forbidden, CurrentActor>
  get(id: number): Effect.Effect<Tag, Forbidden | NotFound, CurrentActor>
  create(input: TagInput): Effect.Effect<Tag, Forbidden | Unprocessable, CurrentActor>
  update(id: number, input: TagInput): Effect.Effect<Tag, Forbidden | NotFound | Unprocessable, CurrentActor>
  delete(id: number): Effect.Effect<void, Forbidden | NotFound, CurrentActor>
}>()("crm/tags/Tags") {
  static readonly layerNoDeps = Layer.effect(
    Tags,
    Effect.gen(function*() {
      const repo = yield* TagsRepo

      const list = Effect.gen(function*() {
        const company = yield* requirePermission("tag.view")
        return yield* repo.list(company.id)
      }).pipe(Effect.withSpan("Tags.list"))

      const get = Effect.fn("Tags.get")(function*(id: number) {
        const company = yield* requirePermission("tag.view")
        const tag = yield* repo.find(company.id, id)
        if (Option.isNone(tag)) return yield* tagNotFound()
        return tag.value
      })

      const create = Effect.fn("Tags.create")(function*(input: TagInput) {
        const company = yield* requirePermission("tag.create")
        const id = yield* repo.insert(company.id, input.name.trim())
        if (Option.isNone(id)) return yield* nameTaken()
        return yield* orNotFound(yield* repo.find(company.id, id.value))
      })

      const update = Effect.fn("Tags.update")(function*(id: number, input: TagInput) {
        const company = yield* requirePermission("tag.update")
        const renamed = yield* repo.rename(company.id, id, input.name.trim())
        if (Option.isNone(renamed)) return yield* nameTaken()
        if (!renamed.value) return yield* tagNotFound()
        return yield* orNotFound(yield* repo.find(company.id, id))
      })

      const remove = Effect.fn("Tags.delete")(function*(id: number) {
        const company = yield* requirePermission("tag.delete")
        if (!(yield* repo.delete(company.id, id))) return yield* tagNotFound()
      })

      return Tags.of({ list, get, create, update, delete: remove })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(TagsRepo.layer))
}

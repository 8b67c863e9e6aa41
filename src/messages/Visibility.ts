import { Context, Effect, Layer, Option } from "effect"
import { ChannelAccess } from "../auth/ChannelAccess.ts"
import { type Actor, type CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { type Forbidden, type NotFound, notFound } from "../platform/Errors.ts"
import { type MessageRow, MessagesRepo } from "./Repo.ts"
import { type ChannelRow, type ThreadContext, ThreadsRepo } from "./ThreadsRepo.ts"

export const messageNotFound = () => notFound("Message not found.")

/** Load-or-404: a record of another company, or on a channel the caller may not see, does not exist for them. */
export class Visibility extends Context.Service<Visibility, {
  /** The message, after the permission check, with the caller's company and actor. */
  message(id: number, permission: string): Effect.Effect<{
    readonly company: NonNullable<Actor["company"]>
    readonly actor: Actor
    readonly row: MessageRow
  }, Forbidden | NotFound, CurrentActor>
  thread(companyId: CompanyId, id: number): Effect.Effect<ThreadContext, NotFound, CurrentActor>
  channel(companyId: CompanyId, id: number): Effect.Effect<ChannelRow, NotFound, CurrentActor>
}>()("crm/messages/Visibility") {
  static readonly layerNoDeps = Layer.effect(
    Visibility,
    Effect.gen(function*() {
      const messages = yield* MessagesRepo
      const threads = yield* ThreadsRepo
      const access = yield* ChannelAccess

      const message = Effect.fnUntraced(function*(id: number, permission: string) {
        const company = yield* requirePermission(permission)
        const actor = yield* CurrentActor
        const row = yield* messages.find(company.id, id)
        if (Option.isNone(row) || !(yield* access.canSee(company.id, actor, row.value.channel_id))) {
          return yield* messageNotFound()
        }
        return { company, actor, row: row.value }
      })

      const channel = Effect.fnUntraced(function*(companyId: CompanyId, id: number) {
        const actor = yield* CurrentActor
        const row = yield* threads.channel(companyId, id)
        if (Option.isNone(row) || !(yield* access.canSee(companyId, actor, id))) return yield* notFound("Channel not found.")
        return row.value
      })

      const thread = Effect.fnUntraced(function*(companyId: CompanyId, id: number) {
        const actor = yield* CurrentActor
        const found = yield* threads.threadContext(companyId, id)
        if (Option.isNone(found) || found.value.channel_deleted || !(yield* access.canSee(companyId, actor, found.value.channel_id))) {
          return yield* notFound("Thread not found.")
        }
        return found.value
      })

      return Visibility.of({ message, thread, channel })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([MessagesRepo.layer, ThreadsRepo.layer]))
}

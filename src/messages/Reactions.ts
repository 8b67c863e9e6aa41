import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { type CompanyId, CurrentActor } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { Credentials } from "../providers/Credentials.ts"
import { channelRules } from "../providers/Domain.ts"
import { Providers } from "../providers/Provider.ts"
import { type BadGateway, type Forbidden, invalidFields as invalid, type NotFound, ruleViolation, type Unprocessable, orNotFound } from "../platform/Errors.ts"
import type { Reaction, SetReaction } from "./Domain.ts"
import { type MessageRow, MessagesRepo } from "./Repo.ts"
import { contextOf, providerFailed, recipientOf } from "./Rules.ts"
import { ThreadsRepo } from "./ThreadsRepo.ts"
import { Visibility } from "./Visibility.ts"

type Denied = Forbidden | NotFound

const present = <A>(value: A | null | undefined): value is A => value !== null && value !== undefined

const reactionEvent = (row: MessageRow, action: "added" | "removed", reaction: Reaction | null, replaced: boolean) => ({
  message_id: row.id,
  conversation_id: row.conversation_id,
  thread_id: row.thread_id,
  channel_id: row.channel_id,
  action,
  replaced,
  reaction
})

/** The operator's reactions on messages, and likes of comments. */
export class Reactions extends Context.Service<Reactions, {
  list(id: number): Effect.Effect<ReadonlyArray<Reaction>, Denied, CurrentActor>
  react(id: number, input: SetReaction): Effect.Effect<Reaction, Denied | Unprocessable, CurrentActor>
  unreact(id: number): Effect.Effect<boolean, Denied, CurrentActor>
  like(id: number): Effect.Effect<void, Denied | Unprocessable | BadGateway, CurrentActor>
}>()("crm/messages/Reactions") {
  static readonly layerNoDeps = Layer.effect(
    Reactions,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* MessagesRepo
      const threads = yield* ThreadsRepo
      const visibility = yield* Visibility
      const events = yield* Events
      const providers = yield* Providers
      const credentials = yield* Credentials

      const list = Effect.fn("Reactions.list")(function*(id: number) {
        const { company, row } = yield* visibility.message(id, "conversation.view")
        return yield* repo.reactions(company.id, row.id)
      })

      /** Reactions are kept even when the provider refuses them: the operator's choice is recorded, the failure logged. */
      const pushReaction = (companyId: CompanyId, row: MessageRow, reaction: string | null) =>
        Effect.gen(function*() {
          if (row.external_message_id === null) return
          const thread = yield* orNotFound(yield* threads.threadContext(companyId, row.thread_id))
          if (thread.channel_status !== "connected") return
          const channel = contextOf(credentials, companyId, thread)
          yield* providers.forChannel(channel).react(channel, recipientOf(thread), row.external_message_id, reaction).pipe(
            Effect.catchTag("ProviderError", (e) => Effect.logWarning("provider reaction failed", { code: e.code, message: e.message }))
          )
        })

      const react = Effect.fn("Reactions.react")(function*(id: number, input: SetReaction) {
        const { company, actor, row } = yield* visibility.message(id, "conversation.update")
        if (present(input.author_user_id) && present(input.author_contact_account_id)) {
          return yield* invalid({ author_user_id: ["Give author_user_id or author_contact_account_id, not both."] })
        }
        if (present(input.author_user_id) && !(yield* repo.isMember(company.id, input.author_user_id))) {
          return yield* invalid({ author_user_id: ["The selected author user id is invalid."] })
        }
        if (present(input.author_contact_account_id) && Option.isNone(yield* threads.account(company.id, input.author_contact_account_id))) {
          return yield* invalid({ author_contact_account_id: ["The selected author contact account id is invalid."] })
        }
        if (row.deleted_at !== null) return yield* ruleViolation("message_deleted", "The message was deleted.")
        const authorUserId = present(input.author_contact_account_id) ? null : input.author_user_id ?? actor.userId
        const result = yield* Effect.gen(function*() {
          const result = yield* repo.setOutboundReaction(company.id, id, row.channel_id, {
            reaction: input.reaction,
            authorUserId,
            authorContactAccountId: input.author_contact_account_id ?? null
          })
          yield* events.emit(company.id, "message.reaction.updated", reactionEvent(row, "added", result.reaction, result.replaced))
          return result
        }).pipe(sql.withTransaction, Effect.orDie)
        yield* pushReaction(company.id, row, input.reaction)
        return result.reaction
      })

      const unreact = Effect.fn("Reactions.unreact")(function*(id: number) {
        const { company, row } = yield* visibility.message(id, "conversation.update")
        const removed = yield* Effect.gen(function*() {
          const removed = yield* repo.removeOutboundReaction(company.id, id, row.channel_id)
          if (Option.isSome(removed)) {
            yield* events.emit(company.id, "message.reaction.updated", reactionEvent(row, "removed", removed.value, false))
          }
          return Option.isSome(removed)
        }).pipe(sql.withTransaction, Effect.orDie)
        if (removed) yield* pushReaction(company.id, row, null)
        return removed
      })

      const like = Effect.fn("Reactions.like")(function*(id: number) {
        const { company, row } = yield* visibility.message(id, "conversation.update")
        const thread = yield* orNotFound(yield* threads.threadContext(company.id, row.thread_id))
        if (!channelRules[row.channel_type].likes || !thread.is_group) {
          return yield* ruleViolation("not_a_comment", "Only comments in msgr_c_business comment threads can be liked.")
        }
        if (row.external_message_id === null) {
          return yield* ruleViolation("no_external_id", "The message has no provider id, so it cannot be liked.")
        }
        if (thread.channel_status !== "connected") return yield* ruleViolation("channel_not_connected", "The channel is not connected.")
        const channel = contextOf(credentials, company.id, thread)
        yield* providers.forChannel(channel).like(channel, thread.external_thread_id ?? "", row.external_message_id).pipe(
          Effect.mapError(providerFailed)
        )
      })

      return Reactions.of({ list, react, unreact, like })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([Visibility.layer, MessagesRepo.layer, ThreadsRepo.layer]))
}

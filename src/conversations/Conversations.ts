import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { ChannelAccess } from "../auth/ChannelAccess.ts"
import { type CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { type Forbidden, invalidField, type NotFound, notFound, type Unprocessable } from "../platform/Errors.ts"
import { cursorInfo, pageInfo } from "../platform/Pagination.ts"
import type {
  AssignInput,
  Conversation,
  ConversationDetail,
  ConversationList,
  ListFilters,
  PriorityInput,
  ReadInput,
  StatusInput
} from "./Domain.ts"
import { AssignmentPush } from "./AssignmentPush.ts"
import { type Before, ConversationsRepo, type ListPlan, type Position } from "./Repo.ts"

export interface ListRequest extends ListFilters {
  readonly page?: number | undefined
  readonly perPage?: number | undefined
  readonly cursor?: string | undefined
}

const Cursor = Schema.fromJsonString(Schema.Tuple([Schema.NullOr(Schema.String.check(Schema.isPattern(/^-?\d{1,20}$/))), Schema.Int]))
const decodeCursor = Schema.decodeUnknownOption(Cursor)

const encodeCursor = (p: Position) => Buffer.from(JSON.stringify([p.activityUs, p.id])).toString("base64url")

const readCursor = (text: string) =>
  Option.match(decodeCursor(Buffer.from(text, "base64url").toString("utf8")), {
    onNone: () => Effect.fail(invalidField("cursor", "The cursor is invalid.")),
    onSome: ([activityUs, id]) => Effect.succeed<Position>({ activityUs, id })
  })

const conversationNotFound = () => notFound("Conversation not found.")

/** What the conversation events carry about the conversation, besides their own fields. */
const subject = (id: number, before: Before) => ({ conversation_id: id, contact_id: before.contact_id })

type Change<A> = Effect.Effect<A, Forbidden | NotFound | Unprocessable, CurrentActor>

/** The operator's inbox: conversations of the active company on channels the caller sees, and their handling. */
export class Conversations extends Context.Service<Conversations, {
  list(request: ListRequest): Effect.Effect<ConversationList, Forbidden | Unprocessable, CurrentActor>
  get(id: number): Effect.Effect<ConversationDetail, Forbidden | NotFound, CurrentActor>
  assign(id: number, input: AssignInput): Change<Conversation>
  setStatus(id: number, input: StatusInput): Change<Conversation>
  setPriority(id: number, input: PriorityInput): Change<Conversation>
  markRead(id: number, input: ReadInput): Change<Conversation>
  /** The caller as a member of the conversation's presence channel; none when it is not a conversation they see. */
  presence(id: number): Effect.Effect<Option.Option<{ readonly user_id: number; readonly user_info: { readonly name: string } }>, Forbidden, CurrentActor>
}>()("crm/conversations/Conversations") {
  static readonly layerNoDeps = Layer.effect(
    Conversations,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* ConversationsRepo
      const access = yield* ChannelAccess
      const events = yield* Events
      const push = yield* AssignmentPush

      const scope = Effect.fnUntraced(function*(permission: string) {
        const company = yield* requirePermission(permission)
        const actor = yield* CurrentActor
        const channelIds = yield* repo.liveChannels(company.id, yield* access.visible(company.id, actor))
        return { companyId: company.id, userId: actor.userId as number, channelIds, actor }
      })

      const list = Effect.fn("Conversations.list")(function*(request: ListRequest) {
        const { channelIds, companyId, userId } = yield* scope("conversation.view")
        const perPage = request.perPage ?? 20
        const page = request.page ?? 1
        const after = request.cursor === undefined ? Option.none() : Option.some(yield* readCursor(request.cursor))
        const plan: ListPlan = {
          userId,
          channelIds,
          filters: request,
          after,
          offset: Option.isSome(after) ? 0 : (page - 1) * perPage,
          limit: perPage
        }
        const [{ items, next }, counts] = yield* Effect.all([repo.list(companyId, plan), repo.counts(companyId, plan)], { concurrency: 2 })
        return {
          items,
          pagination: Option.isSome(after) ? { ...cursorInfo(perPage), total: counts.total } : pageInfo(page, perPage, counts.total),
          meta: { mine: counts.mine, unassigned: counts.unassigned, all: counts.all },
          next_cursor: Option.match(next, { onNone: () => null, onSome: encodeCursor })
        }
      })

      const current = (companyId: CompanyId, userId: number, channelIds: ReadonlyArray<number>, id: number) =>
        Effect.flatMap(repo.find(companyId, userId, channelIds, id), (found) =>
          Option.isNone(found) ? conversationNotFound() : Effect.succeed(found.value))

      const get = Effect.fn("Conversations.get")(function*(id: number) {
        const company = yield* requirePermission("conversation.view")
        const actor = yield* CurrentActor
        const visible = yield* access.visible(company.id, actor)
        const found = yield* current(company.id, actor.userId, yield* repo.liveChannels(company.id, visible), id)
        return { ...found, threads: yield* repo.threads(company.id, visible, id) }
      })

      /** Runs `change` on the locked, visible conversation in one transaction, then answers the conversation as it is now. */
      const changing = <E>(id: number, change: (ctx: {
        readonly companyId: CompanyId
        readonly userId: number
        readonly before: Before & { readonly channel_ids: ReadonlyArray<number> }
        readonly now: Date
      }) => Effect.Effect<void, E>) =>
        Effect.gen(function*() {
          const { channelIds, companyId, userId } = yield* scope("conversation.update")
          yield* Effect.gen(function*() {
            const before = yield* repo.lock(companyId, channelIds, id)
            if (Option.isNone(before)) return yield* conversationNotFound()
            yield* change({ companyId, userId, before: before.value, now: new Date(yield* Clock.currentTimeMillis) })
          }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
          return yield* current(companyId, userId, channelIds, id)
        })

      const updated = (companyId: CompanyId, id: number, before: Before, changes: ReadonlyArray<string>, userId: number, extra: object) =>
        events.emit(companyId, "conversation.updated", { ...subject(id, before), changes, by_user_id: userId, ...extra })

      // Another company's conversation is 404 whatever the body says: the rules of the body are checked once it is found.
      const assign = Effect.fn("Conversations.assign")(function*(id: number, input: AssignInput) {
        return yield* changing(id, Effect.fnUntraced(function*({ before, companyId, now, userId }) {
          if (input.assignee_id === undefined && input.team_id === undefined) {
            return yield* invalidField("assignee_id", "The assignee id or team id field is required.")
          }
          const assignee = input.assignee_id === undefined ? before.assigned_user_id : input.assignee_id
          const team = input.team_id === undefined ? before.assigned_team_id : input.team_id
          if (assignee !== null && assignee !== before.assigned_user_id) {
            const member = yield* repo.memberSeeing(companyId, assignee, before.channel_ids)
            if (Option.isNone(member) || !member.value.seesChannel) {
              return yield* invalidField("assignee_id", "The assignee must be a member who sees this conversation's channel.")
            }
          }
          if (team !== null && team !== before.assigned_team_id && !(yield* repo.teamExists(companyId, team))) {
            return yield* invalidField("team_id", "The selected team id is invalid.")
          }
          if (assignee === before.assigned_user_id && team === before.assigned_team_id) return
          yield* repo.assign(companyId, id, assignee, team, now)
          const notified = assignee !== null && assignee !== before.assigned_user_id && assignee !== userId &&
            (yield* push.allowed(companyId, assignee, now))
          yield* events.emit(companyId, "conversation.assigned", {
            ...subject(id, before),
            assigned_user_id: assignee,
            assigned_team_id: team,
            previous_user_id: before.assigned_user_id,
            previous_team_id: before.assigned_team_id,
            by_user_id: userId,
            // `user_id` routes the event to the assignee's private-user channel: their push, unless their preferences hold it.
            ...(notified ? { user_id: assignee } : {}),
            notified
          })
          yield* updated(companyId, id, before, ["assignee", "team"].filter((field) =>
            field === "assignee" ? assignee !== before.assigned_user_id : team !== before.assigned_team_id), userId, {})
        }))
      })

      const setStatus = Effect.fn("Conversations.setStatus")(function*(id: number, input: StatusInput) {
        return yield* changing(id, Effect.fnUntraced(function*({ before, companyId, now, userId }) {
          const until = yield* snoozeTime(input)
          if (until !== null && until.getTime() <= now.getTime()) {
            return yield* invalidField("snoozed_until", "The snoozed until field must be a date in the future.")
          }
          yield* repo.setStatus(companyId, id, input.status, until, now)
          const change = { from: before.status, to: input.status, snoozed_until: until?.toISOString() ?? null }
          if (before.status !== input.status) {
            yield* events.emit(companyId, "conversation.status_changed", { ...subject(id, before), ...change, reason: "user", by_user_id: userId })
          }
          yield* updated(companyId, id, before, ["status"], userId, change)
        }))
      })

      const setPriority = Effect.fn("Conversations.setPriority")(function*(id: number, input: PriorityInput) {
        return yield* changing(id, Effect.fnUntraced(function*({ before, companyId, now, userId }) {
          if (before.priority === input.priority) return
          yield* repo.setPriority(companyId, id, input.priority, now)
          yield* updated(companyId, id, before, ["priority"], userId, { from: before.priority, to: input.priority })
        }))
      })

      const markRead = Effect.fn("Conversations.markRead")(function*(id: number, input: ReadInput) {
        const { channelIds, companyId, userId } = yield* scope("conversation.view")
        yield* current(companyId, userId, channelIds, id)
        const read = yield* repo.markRead(companyId, id, userId, input.message_id ?? null)
        if (Option.isNone(read) && input.message_id !== undefined) {
          return yield* invalidField("message_id", "The message is not one of this conversation's.")
        }
        return yield* current(companyId, userId, channelIds, id)
      })

      const presence = Effect.fn("Conversations.presence")(function*(id: number) {
        const { actor, channelIds, companyId, userId } = yield* scope("conversation.view")
        const found = yield* repo.find(companyId, userId, channelIds, id)
        const name = [actor.account.name, actor.account.lastname ?? ""].join(" ").trim()
        return Option.map(found, () => ({ user_id: userId, user_info: { name } }))
      })

      return Conversations.of({ list, get, assign, setStatus, setPriority, markRead, presence })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([ConversationsRepo.layer, AssignmentPush.layer]))
}

const snoozeTime = (input: StatusInput) => {
  if (input.status !== "snoozed") return Effect.succeed(null)
  if (input.snoozed_until === undefined || input.snoozed_until === null) {
    return Effect.fail(invalidField("snoozed_until", "The snoozed until field is required when status is snoozed."))
  }
  return Effect.succeed(new Date(input.snoozed_until))
}

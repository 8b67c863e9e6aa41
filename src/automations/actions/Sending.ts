import { Effect, Option } from "effect"
import type { SendRefusal, SendUnavailable } from "../../messages/SendLane.ts"
import type { TemplateRefusal } from "../../templates/Sending.ts"
import { permanent, type StepError, type StepInput, transient } from "./Action.ts"
import type { ActionServices } from "./ActionServices.ts"

/** A send's idempotency key: a retried or replayed step sends once. */
export const keyOf = (input: StepInput) => `automation:${input.run.id}:${input.nodeId}:${input.visit}`

/** A refused send fails the step for good; a lane that could not take it is retried. */
export const sendRefusals = <A>(effect: Effect.Effect<A, SendRefusal | SendUnavailable | TemplateRefusal>): Effect.Effect<A, StepError> =>
  effect.pipe(Effect.catchTags({
    SendRefusal: (e) => Effect.fail(permanent(`${e.reason}: ${e.message}`)),
    SendUnavailable: (e) => Effect.fail(transient(e.message)),
    TemplateRefusal: (e) => Effect.fail(permanent(`${e.reason}: ${e.message}`))
  }))

/** The thread a send of the run goes to: the trigger's own, else the contact's account on the channel asked for. */
export const threadFor = Effect.fnUntraced(function*(
  services: ActionServices["Service"],
  input: StepInput,
  data: { readonly channel_id?: number | undefined },
  channelType: string | undefined
) {
  const { companyId, run } = input
  const { ctx, outbound } = services
  const c = run.context
  // The trigger's own thread, in one read, when the send addresses it.
  if (typeof c.thread_id === "number" && typeof c.contact_account_id === "number" && (data.channel_id === undefined || data.channel_id === c.channel_id)) {
    const own = yield* services.ownThreads.submit({ companyId, threadId: c.thread_id })
    if (
      own !== undefined && !own.channel_deleted && own.contact_account_id === c.contact_account_id &&
      (channelType === undefined || own.channel_type.startsWith(channelType))
    ) return own
  }
  const types = yield* ctx.channelTypes(companyId)
  const fits = (channelId: number) => channelType === undefined || (types.get(channelId) ?? "").startsWith(channelType)
  let target: Option.Option<{ channelId: number; accountId: number }> = Option.none()
  if (typeof c.channel_id === "number" && typeof c.contact_account_id === "number" && (data.channel_id ?? c.channel_id) === c.channel_id && fits(c.channel_id)) {
    target = Option.some({ channelId: c.channel_id, accountId: c.contact_account_id })
  } else if (typeof c.contact_id === "number") {
    const preferred = data.channel_id ?? (typeof c.channel_id === "number" && fits(c.channel_id) ? c.channel_id : undefined)
    target = yield* ctx.accountOn(companyId, c.contact_id, { ...(preferred !== undefined ? { channelId: preferred } : {}), ...(channelType !== undefined ? { channelType } : {}) })
  }
  if (Option.isNone(target)) return yield* permanent(`The contact has no ${channelType ?? "matching"} conversation to send in.`)
  const thread = yield* outbound.threadFor(companyId, target.value.channelId, target.value.accountId)
  if (Option.isNone(thread)) return yield* permanent("The conversation's thread was not found.")
  return thread.value
})

import { Clock, Context, Data, DateTime, Effect, Layer, Option, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId, CurrentActor, type Actor, UserId } from "../auth/Domain.ts"
import { rolePermissions } from "../auth/Permissions.ts"
import type { Plan } from "../auth/Plans.ts"
import { Contacts } from "../contacts/Contacts.ts"
import { Deals } from "../deals/Deals.ts"
import { Events } from "../events/Events.ts"
import { Media } from "../media/Media.ts"
import { Outbound } from "../messages/Outbound.ts"
import { Send } from "../messages/Send.ts"
import type { SendRefusal, SendUnavailable } from "../messages/SendLane.ts"
import { type ThreadContext, ThreadsRepo } from "../messages/ThreadsRepo.ts"
import { AppConfig } from "../platform/Config.ts"
import { makeBatcher, makeReadBatcher } from "../platform/Batcher.ts"
import { Jobs, jobHandler } from "../platform/Jobs.ts"
import { OutboundHttp } from "../platform/OutboundHttp.ts"
import { templateContent, type TemplateRefusal, TemplateSending } from "../templates/Sending.ts"
import {
  actionById,
  AssignData,
  type ConditionData,
  ContactFieldData,
  CreateDealData,
  type HttpData,
  MoveStageData,
  NotifyData,
  type SendData,
  TagData,
  type TemplateData,
  type WaitData
} from "./Actions.ts"
import { evaluate } from "./Conditions.ts"
import { AutomationContextRepo } from "./ContextRepo.ts"
import type { Edge, Node } from "./Domain.ts"
import { AutomationsRepo, type NewStep, type RunState } from "./Repo.ts"
import { directHoldMs, firstState, RunJob } from "./Runs.ts"
import type { Started, StartRequest } from "./Starter.ts"
import { factsFrom } from "./Triggers.ts"

/** A step that did not work: transient ones are retried (3 attempts in all), the others fail the run at once. */
export class StepError extends Data.TaggedError("StepError")<{ readonly message: string; readonly transient: boolean }> {}

const permanent = (message: string) => new StepError({ message, transient: false })
const transient = (message: string) => new StepError({ message, transient: true })

export const stepAttempts = 3
/** Version graphs kept in memory. */
const graphsKept = 1_000
const outputLimit = 4096
const httpBodyLimit = 4096

/** Step outputs are capped: a long one keeps its first 4 KB as text. */
const capped = (output: unknown) => {
  const text = JSON.stringify(output ?? null)
  return text.length <= outputLimit ? output : { truncated: true, preview: text.slice(0, outputLimit) }
}

const unitMs = { seconds: 1000, minutes: 60_000, hours: 3600_000, days: 86_400_000 } as const

/** When a wait ends: after its duration, or at the next HH:MM in `timezone`. */
export const wakeAt = (data: WaitData, now: number, timezone: string): number => {
  if ("duration" in data) return now + data.duration * unitMs[data.unit]
  const [h, m] = data.until.split(":").map(Number)
  let parts: Record<string, string>
  try {
    parts = Object.fromEntries(
      new Intl.DateTimeFormat("en-US", { timeZone: timezone, hour12: false, hour: "2-digit", minute: "2-digit", second: "2-digit" })
        .formatToParts(new Date(now)).map((p) => [p.type, p.value])
    )
  } catch {
    return wakeAt(data, now, "UTC")
  }
  const local = (Number(parts.hour) % 24) * 3600 + Number(parts.minute) * 60 + Number(parts.second)
  let delta = h * 3600 + m * 60 - local
  if (delta <= 0) delta += 86_400
  return now + delta * 1000
}

const wireMessage = (e: unknown) => (e !== null && typeof e === "object" && "message" in e ? String((e as { message: unknown }).message) : String(e))

const systemActor = (companyId: CompanyId, who: { userId: number; plan: string; timezone: string; email: string | null; name: string }): Actor => ({
  userId: UserId.make(who.userId),
  email: who.email,
  isServiceAccount: false,
  kind: "service",
  tokenId: null,
  sessionId: null,
  abilities: ["*"],
  account: {
    id: who.userId,
    name: who.name,
    lastname: null,
    email: who.email,
    email_verified_at: null,
    phone: null,
    phone_verified: false,
    timezone: who.timezone,
    locale: "en",
    availability: "online",
    is_service_account: false,
    current_company_id: companyId,
    photo_version: null
  },
  company: { id: companyId, plan: who.plan as Plan, role: "admin", permissions: rolePermissions.admin }
})

/** Runs ending, or tag steps, written in one batch at most. */
const batchMax = 256

interface Ending {
  readonly companyId: CompanyId
  readonly run: RunState
  readonly status: "succeeded" | "failed"
  readonly error: string | null
  readonly jobId: number | null
  readonly steps: ReadonlyArray<NewStep>
  readonly state: unknown
  readonly at: Date
}

interface TagChange {
  readonly companyId: CompanyId
  readonly actor: Actor
  readonly contactId: number
  readonly tagId: number
  readonly adding: boolean
}

interface RunStateJson {
  readonly pending: ReadonlyArray<string>
  readonly visits: Record<string, number>
  readonly outputs: Record<string, unknown>
  readonly started?: boolean
  readonly segment?: number
}

/**
 * Runs a run's steps from where it stands until it ends or waits: a first segment at once in the
 * process that admitted the run (`direct`), later segments and fallbacks as `automation.run` jobs.
 */
export class RunExecutor extends Context.Service<RunExecutor, {
  /**
   * `fresh`: nothing after the run's checkpoint has been written yet (the segment's first execution).
   * `jobId`: the segment's queued fallback job, dismissed with the segment's last write.
   */
  execute(companyId: CompanyId, runId: string, segment: number, fresh: boolean, jobId: number | null): Effect.Effect<void>
  /**
   * A run's first segment, now, in this process; its fallback job is held off while it runs. Should
   * the hold be lost (the job was claimed, this process stalled), the segment stops and the job's
   * runner carries on from the steps written.
   */
  direct(companyId: CompanyId, started: Started, request: StartRequest): Effect.Effect<void>
}>()("crm/automations/RunExecutor") {
  static readonly layer = Layer.effect(RunExecutor, Effect.gen(function*() {
    const repo = yield* AutomationsRepo
    const ctx = yield* AutomationContextRepo
    const sql = yield* SqlClient.SqlClient
    const jobs = yield* Jobs
    const events = yield* Events
    const outbound = yield* Outbound
    const media = yield* Media
    const contacts = yield* Contacts
    const deals = yield* Deals
    const http = yield* OutboundHttp
    const config = yield* AppConfig
    const templates = yield* TemplateSending
    const sender = yield* Send
    const threads = yield* ThreadsRepo

    const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

    const execute = (companyId: CompanyId, runId: string, segment: number, fresh: boolean, jobId: number | null) =>
      Effect.flatMap(repo.loadRun(companyId, runId), (found) => Option.isNone(found) ? Effect.void : executeRun(companyId, found.value, segment, fresh, jobId))

    // Versions never change once written, so their graphs are kept: a first segment then reads nothing of its run.
    const graphs = new Map<string, { readonly nodes: ReadonlyArray<Node>; readonly edges: ReadonlyArray<Edge> }>()
    const graphOf = (companyId: CompanyId, versionId: string) => {
      const known = graphs.get(versionId)
      if (known !== undefined) return Effect.succeed(Option.some(known))
      return Effect.tap(repo.graph(companyId, versionId), (found) =>
        Effect.sync(() => {
          if (Option.isNone(found)) return
          if (graphs.size >= graphsKept) graphs.delete(graphs.keys().next().value!)
          graphs.set(versionId, found.value)
        }))
    }

    const executeRun = Effect.fnUntraced(function*(companyId: CompanyId, run: RunState, segment: number, fresh: boolean, jobId: number | null) {
      const runId = run.id
      if (run.status === "succeeded" || run.status === "failed" || run.status === "cancelled") return
      if (((run.state as RunStateJson).segment ?? 0) !== segment) return
      const nodes = new Map(run.nodes.map((n) => [n.id, n]))
      if (run.actor === null) return yield* finish(companyId, run, "failed", "The company has no member to act for.", jobId, [], null)
      const actor = systemActor(companyId, run.actor)
      const context = run.context
      const stored = run.state as RunStateJson
      const trigger = run.nodes.find((n) => n.type === "trigger")!
      const next = (nodeId: string, handle: string | null) =>
        run.edges.filter((e) => e.source === nodeId && (handle === null || e.sourceHandle === handle)).map((e) => e.target)
      const state = {
        pending: stored.started ? [...stored.pending] : next(trigger.id, null),
        visits: { ...stored.visits },
        outputs: { ...stored.outputs },
        segment
      }
      if (run.status === "waiting") yield* repo.saveState(companyId, runId, "running", { ...state, started: true }, null)

      // Rows of steps a replay repeats harmlessly (`replayable`), written with the run's next write.
      let unwritten: Array<NewStep> = []
      const written = () => {
        const rows = unwritten
        unwritten = []
        return rows
      }

      while (state.pending.length > 0) {
        const nodeId = state.pending[0]
        const node = nodes.get(nodeId)!
        const actionId = node.actionId ?? "unknown"
        const visit = (state.visits[nodeId] ?? 0) + 1
        const advance = (output: unknown, handle: string | null) => {
          state.pending = [...state.pending.slice(1), ...next(nodeId, handle)]
          state.visits[nodeId] = visit
          state.outputs[nodeId] = output
        }
        const done = fresh ? Option.none() : yield* repo.step(companyId, runId, nodeId, visit)
        if (Option.isSome(done)) {
          if (done.value.status === "failed") return yield* finish(companyId, run, "failed", done.value.error, jobId, written(), null)
          advance(done.value.output, handleOf(actionId, done.value.output))
          continue
        }
        const startedAt = yield* nowDate
        if (actionId === "wait") {
          const wake = new Date(wakeAt(node.data as WaitData, startedAt.getTime(), run.timezone))
          const output = { resume_at: wake.toISOString() }
          advance(output, null)
          state.segment = segment + 1
          const rows = [...written(), { runId, nodeId, visit, actionId, status: "succeeded" as const, attempt: 1, output, error: null, startedAt, finishedAt: startedAt }]
          yield* Effect.gen(function*() {
            yield* repo.recordSteps(companyId, runId, rows, "waiting", { ...state, started: true }, wake)
            yield* jobs.enqueue(RunJob, companyId, { runId, segment: segment + 1 }, { runAfter: DateTime.fromDateUnsafe(wake) })
            if (jobId !== null) yield* jobs.dismiss(companyId, jobId)
          }).pipe(sql.withTransaction, Effect.orDie)
          return
        }
        let attempt = 0
        const once = Effect.suspend(() => {
          attempt++
          return step(node, { companyId, run, actor, visit, outputs: state.outputs })
        })
        const result = yield* once.pipe(
          Effect.catchDefect((d) => Effect.fail(transient(`Unexpected failure: ${wireMessage(d)}`))),
          Effect.retry({ while: (e: StepError) => e.transient, times: stepAttempts - 1, schedule: Schedule.exponential("200 millis") }),
          Effect.result
        )
        const finishedAt = yield* nowDate
        if (result._tag === "Failure") {
          const failed: NewStep = { runId, nodeId, visit, actionId, status: "failed", attempt, output: null, error: result.failure.message, startedAt, finishedAt }
          return yield* finish(companyId, run, "failed", `Step ${nodeId} (${actionId}) failed: ${result.failure.message}`, jobId, [...written(), failed], null)
        }
        const output = capped(result.success.output)
        advance(output, handleOf(actionId, output))
        const row: NewStep = { runId, nodeId, visit, actionId, status: "succeeded", attempt, output, error: null, startedAt, finishedAt }
        if (result.success.commit !== Effect.void) {
          const rows = [...written(), row]
          yield* Effect.andThen(result.success.commit, repo.recordSteps(companyId, runId, rows, "running", { ...state, started: true }, null)).pipe(
            sql.withTransaction,
            Effect.orDie
          )
        } else if (result.success.replayable || state.pending.length === 0) {
          // The run's last step is written with its end.
          unwritten.push(row)
        } else {
          yield* repo.recordSteps(companyId, runId, [...written(), row], "running", { ...state, started: true }, null)
        }
      }
      return yield* finish(companyId, run, "succeeded", null, jobId, written(), { ...state, started: true })
    })

    const handleOf = (actionId: string, output: unknown) =>
      actionId === "condition" ? String((output as { result?: unknown } | null)?.result === true) : null

    // Runs of a company that end while others' ends are being written end together: their last step
    // rows, ends, events and fallback jobs' dismissals in one statement.
    const ends = yield* makeBatcher<Ending, void>({
      key: (e) => String(e.companyId),
      max: batchMax,
      run: (_, items) => {
        const companyId = items[0].companyId
        const jobIds = items.flatMap((e) => (e.jobId === null ? [] : [e.jobId]))
        return events.emitMany(
          companyId,
          items.map((e) => ({
            key: "automation.run.finished",
            payload: {
              automation_id: e.run.automation_id,
              run_id: e.run.id,
              version_id: e.run.version_id,
              status: e.status,
              error: e.error,
              duration_ms: e.at.getTime() - e.run.started_at.getTime()
            }
          })),
          sql`${repo.finishRuns(companyId, items.map((e) => ({ runId: e.run.id, status: e.status, error: e.error, at: e.at, state: e.state })), items.flatMap((e) => e.steps))}${
            jobIds.length === 0 ? sql`` : sql`, dismissed AS (${jobs.dismissing(companyId, jobIds)})`
          }`
        ).pipe(Effect.as(items.map(() => undefined)))
      }
    })

    const finish = Effect.fnUntraced(function*(
      companyId: CompanyId,
      run: RunState,
      status: "succeeded" | "failed",
      error: string | null,
      jobId: number | null,
      steps: ReadonlyArray<NewStep>,
      state: unknown
    ) {
      yield* ends.submit({ companyId, run, status, error, jobId, steps, state, at: yield* nowDate })
    })

    // The trigger's threads that concurrent sends of a company address, read together.
    const ownThreads = yield* makeReadBatcher<{ readonly companyId: CompanyId; readonly threadId: number }, ThreadContext>({
      key: (t) => String(t.companyId),
      id: (t) => t.threadId,
      max: batchMax,
      read: (first, ids) => threads.threadContexts(first.companyId, ids)
    })

    // Tag steps of a company's concurrent runs, acting as one member, in one read and at most one write.
    const tagChanges = yield* makeBatcher<TagChange, boolean | { readonly message: string }>({
      key: (c) => `${c.companyId}:${c.actor.userId}:${c.adding}`,
      max: batchMax,
      run: (_, items) =>
        contacts.changeTags(items.map((c) => ({ id: c.contactId, tagId: c.tagId })), items[0].adding).pipe(
          Effect.provideService(CurrentActor, items[0].actor),
          Effect.catch((refused) => Effect.succeed(items.map(() => refused)))
        )
    })

    interface StepInput {
      readonly companyId: CompanyId
      readonly run: RunState
      readonly actor: Actor
      readonly visit: number
      readonly outputs: Record<string, unknown>
    }
    /**
     * A step's output, and the writes (if any) that commit with its step row. `replayable`: the step
     * only reads, or makes a change a replay finds made (a tag already added is left as it is, without
     * a second event), so its row may wait for the run's next write.
     */
    interface Done {
      readonly output: unknown
      readonly commit: Effect.Effect<void>
      readonly replayable?: boolean
    }
    const doneWith = (output: unknown): Done => ({ output, commit: Effect.void })

    const asActor = <A, E>(actor: Actor, effect: Effect.Effect<A, E, CurrentActor>) =>
      effect.pipe(
        Effect.provideService(CurrentActor, actor),
        Effect.mapError((e) => permanent(wireMessage(e)))
      )

    const contactOf = (input: StepInput) => {
      const id = input.run.context.contact_id
      return typeof id === "number" ? Effect.succeed(id) : Effect.fail(permanent("The trigger names no contact."))
    }

    const decode = <A>(schema: Schema.Codec<A, any>, data: unknown) =>
      Schema.decodeUnknownEffect(schema)(data ?? {}).pipe(Effect.mapError(() => permanent("The step's data is invalid.")))

    const threadFor = Effect.fnUntraced(function*(input: StepInput, data: { channel_id?: number | undefined }, channelType: string | undefined) {
      const { companyId, run } = input
      const c = run.context
      // The trigger's own thread, in one read, when the send addresses it.
      if (typeof c.thread_id === "number" && typeof c.contact_account_id === "number" && (data.channel_id === undefined || data.channel_id === c.channel_id)) {
        const own = yield* ownThreads.submit({ companyId, threadId: c.thread_id })
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

    const keyOf = (input: StepInput, nodeId: string) => `automation:${input.run.id}:${nodeId}:${input.visit}`

    /** A refused send fails the step for good; a lane that could not take it is retried. */
    const sendRefusals = <A>(effect: Effect.Effect<A, SendRefusal | SendUnavailable | TemplateRefusal>): Effect.Effect<A, StepError> =>
      effect.pipe(Effect.catchTags({
        SendRefusal: (e) => Effect.fail(permanent(`${e.reason}: ${e.message}`)),
        SendUnavailable: (e) => Effect.fail(transient(e.message)),
        TemplateRefusal: (e) => Effect.fail(permanent(`${e.reason}: ${e.message}`))
      }))

    const step = (node: Node, input: StepInput): Effect.Effect<Done, StepError> => {
      const { companyId, run, actor } = input
      const spec = actionById.get(node.actionId ?? "")
      if (spec === undefined) return Effect.fail(permanent(`Unknown action ${node.actionId}.`))
      switch (spec.id) {
        case "msgr_a-send-message":
        case "msgr_b-send-message":
        case "send-message":
          return Effect.gen(function*() {
            const data = (yield* decode(spec.data, node.data)) as SendData
            const thread = yield* threadFor(input, data, spec.channelType)
            const key = keyOf(input, node.id)
            const attachments = "media_id" in data
              ? yield* media.resolve(companyId, [{ media_id: data.media_id }]).pipe(Effect.mapError((e) => permanent(e.message)))
              : []
            const message = yield* sendRefusals(sender.one({
              thread,
              endpoint: "send",
              companyId,
              userId: actor.userId,
              messageType: attachments[0]?.type ?? "text",
              text: "text" in data ? data.text : null,
              attachments,
              quotedMessageId: null,
              quotedExternalMessageId: null,
              metadata: { automation_id: run.automation_id, automation_run_id: run.id },
              idempotency: { key, hash: key }
            }))
            return doneWith({ message_id: message.id, conversation_id: message.conversation_id, channel_id: message.channel_id })
          })
        case "send-template":
          return Effect.gen(function*() {
            const data = (yield* decode(spec.data, node.data)) as TemplateData
            const thread = yield* threadFor(input, data, undefined)
            const template = yield* sendRefusals(templates.approved(companyId, {
              templateId: data.template_id,
              channelId: thread.channel_id,
              language: data.language
            }))
            const key = keyOf(input, node.id)
            const content = yield* sendRefusals(Effect.fromResult(
              templateContent(template, data.variables ?? {}, { automation_id: run.automation_id, automation_run_id: run.id })
            ))
            const message = yield* sendRefusals(sender.one({
              ...content,
              thread,
              endpoint: "send-template",
              companyId,
              userId: actor.userId,
              messageType: "template",
              quotedMessageId: null,
              quotedExternalMessageId: null,
              idempotency: { key, hash: key }
            }))
            return doneWith({ message_id: message.id, template_id: template.instanceId })
          })
        case "add-tag":
        case "remove-tag":
          return Effect.gen(function*() {
            const { tag_id } = yield* decode(TagData, node.data)
            const contactId = yield* contactOf(input)
            const changed = yield* tagChanges.submit({ companyId, actor, contactId, tagId: tag_id, adding: spec.id === "add-tag" })
            if (typeof changed !== "boolean") return yield* permanent(changed.message)
            return { output: { contact_id: contactId, tag_id }, commit: Effect.void, replayable: true }
          })
        case "update-contact-field":
          return Effect.gen(function*() {
            const data = yield* decode(ContactFieldData, node.data)
            const contactId = yield* contactOf(input)
            yield* asActor(actor, Effect.asVoid(contacts.get(contactId)))
            return {
              output: { contact_id: contactId, field: data.field },
              commit: asActor(actor, contacts.update(contactId, { [data.field]: data.value } as any)).pipe(Effect.asVoid, Effect.orDie)
            }
          })
        case "opt-out-contact":
          return Effect.gen(function*() {
            const contactId = yield* contactOf(input)
            const result = yield* asActor(actor, contacts.setOptOut(contactId, true))
            return doneWith({ contact_id: contactId, opted_out_at: result.opted_out_at })
          })
        case "create-deal":
          return Effect.gen(function*() {
            const data = yield* decode(CreateDealData, node.data)
            const contactId = yield* contactOf(input)
            // Created with its step row in one transaction: a retried step never makes a second deal.
            const deal = yield* asActor(actor, deals.create({
              title: data.title,
              contact_id: contactId,
              ...(data.funnel_id !== undefined ? { funnel_id: data.funnel_id } : {}),
              ...(data.funnel_stage_id !== undefined ? { funnel_stage_id: data.funnel_stage_id } : {}),
              ...(data.amount !== undefined ? { amount: String(data.amount) } : {}),
              source: "automation"
            } as any)).pipe(sql.withTransaction, Effect.catchTag("SqlError", (e) => Effect.fail(transient(e.message))))
            return doneWith({ deal_id: deal.id, funnel_stage_id: deal.funnel_stage_id })
          })
        case "move-deal-stage":
          return Effect.gen(function*() {
            const data = yield* decode(MoveStageData, node.data)
            const created = Object.values(input.outputs).map((o) => (o as { deal_id?: unknown } | null)?.deal_id).filter((id): id is number => typeof id === "number")
            let dealId: number | null = typeof run.context.deal_id === "number" ? run.context.deal_id : created.at(-1) ?? null
            if (dealId === null && typeof run.context.contact_id === "number") {
              dealId = (yield* ctx.dealStage(companyId, null, run.context.contact_id))?.dealId ?? null
            }
            if (dealId === null) return yield* permanent("The run has no deal to move.")
            const id = dealId
            yield* asActor(actor, deals.update(id, { funnel_stage_id: data.funnel_stage_id }))
            return doneWith({ deal_id: id, funnel_stage_id: data.funnel_stage_id })
          })
        case "notify-user":
          return Effect.gen(function*() {
            const data = yield* decode(NotifyData, node.data)
            const payload = { user_id: data.user_id, message: data.message, automation_id: run.automation_id, run_id: run.id, node_id: node.id }
            return { output: { user_id: data.user_id }, commit: events.emit(companyId, "automation.notification", payload) }
          })
        case "http-request":
          return Effect.gen(function*() {
            const data = (yield* decode(spec.data, node.data)) as HttpData
            const response = yield* http.request({
              url: data.url,
              method: data.method ?? "POST",
              headers: { "content-type": "application/json", "user-agent": "crm-automations/1", ...data.headers },
              ...(data.body !== undefined ? { body: data.body } : data.method === "GET" ? {} : { body: JSON.stringify({ automation_id: run.automation_id, run_id: run.id, trigger: run.context.payload }) }),
              timeoutMs: (data.timeout_seconds ?? 10) * 1000,
              allowPrivate: config.webhookAllowPrivate,
              keepBodyBytes: httpBodyLimit
            }).pipe(Effect.mapError((e) => (e.reason === "timeout" || e.reason === "connection" ? transient(e.message) : permanent(e.message))))
            if (response.status >= 500) return yield* transient(`The server answered HTTP ${response.status}.`)
            if (response.status >= 400) return yield* permanent(`The server answered HTTP ${response.status}.`)
            let body: unknown = response.body ?? null
            try {
              body = typeof body === "string" && body !== "" ? JSON.parse(body) : body
            } catch {
              // a body that is not JSON is kept as text
            }
            return doneWith({ status: response.status, body, duration_ms: response.durationMs })
          })
        case "condition":
          return Effect.gen(function*() {
            const data = (yield* decode(spec.data, node.data)) as ConditionData
            const scope = { trigger: run.context, steps: input.outputs }
            const path = (field: string) =>
              field.split(".").reduce<unknown>((v, k) => (v !== null && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined), scope)
            const contactId = Effect.succeed(typeof run.context.contact_id === "number" ? run.context.contact_id : null)
            const result = yield* evaluate(data.conditions, data.conditionsJoiner, factsFrom(ctx, companyId, run.context, contactId, path), true)
            return { output: { result }, commit: Effect.void, replayable: true }
          })
        case "assign-conversation":
          return Effect.gen(function*() {
            const data = yield* decode(AssignData, node.data)
            const conversationId = run.context.conversation_id
            if (typeof conversationId !== "number") return yield* permanent("The trigger names no conversation.")
            const to = { userId: data.user_id, teamId: data.team_id }
            // Setting the same assignee again is harmless, so a replayed step needs no guard.
            const assigned = yield* Effect.gen(function*() {
              if (!(yield* ctx.assign(companyId, conversationId, to))) return false
              yield* events.emit(companyId, "conversation.assigned", {
                conversation_id: conversationId,
                assigned_user_id: data.user_id ?? null,
                assigned_team_id: data.team_id ?? null,
                ...(data.user_id !== undefined ? { user_id: data.user_id } : {}),
                automation_id: run.automation_id
              })
              return true
            }).pipe(sql.withTransaction, Effect.orDie)
            if (!assigned) return yield* permanent(data.user_id !== undefined ? "The user is not a member of the company." : "The team was not found.")
            return doneWith({ conversation_id: conversationId, user_id: data.user_id ?? null, team_id: data.team_id ?? null })
          })
        default:
          return Effect.fail(permanent(`Unknown action ${spec.id}.`))
      }
    }

    const hold = (companyId: CompanyId, jobId: number) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => jobs.postpone(companyId, jobId, DateTime.makeUnsafe(now + directHoldMs)))

    // Renews the hold until it is lost, then ends (which stops the segment racing it).
    const keepHold = (companyId: CompanyId, jobId: number): Effect.Effect<void> =>
      Effect.sleep(directHoldMs / 3).pipe(
        Effect.andThen(hold(companyId, jobId)),
        Effect.flatMap((held) => (held ? keepHold(companyId, jobId) : Effect.logWarning("automation run handed to its fallback job", { job: jobId })))
      )

    const direct = Effect.fnUntraced(function*(companyId: CompanyId, started: Started, request: StartRequest) {
      // Waited long for a slot: the hold is renewed first, and a job a runner already took is left to it.
      if ((yield* Clock.currentTimeMillis) - started.enqueuedAt > directHoldMs / 3 && !(yield* hold(companyId, started.jobId))) return
      const graph = yield* graphOf(companyId, request.versionId)
      // The run as its admission wrote it (what `loadRun` would read back).
      const first = Option.isNone(graph)
        ? execute(companyId, started.runId, 0, true, started.jobId)
        : executeRun(companyId, {
          id: started.runId,
          company_id: companyId,
          automation_id: request.automationId,
          version_id: request.versionId,
          status: "running",
          context: request.context,
          state: firstState,
          started_at: new Date(started.enqueuedAt),
          timezone: started.timezone,
          actor: started.actor,
          nodes: graph.value.nodes,
          edges: graph.value.edges
        }, 0, true, started.jobId)
      yield* Effect.raceFirst(first, keepHold(companyId, started.jobId))
    })

    return RunExecutor.of({ execute, direct })
  })).pipe(Layer.provide(ThreadsRepo.layer))
}

/** The `automation.run` job. A first segment's job is a fallback: steps of the in-process run may be written already. */
export const RunHandler = jobHandler(RunJob, Effect.gen(function*() {
  const executor = yield* RunExecutor
  // A claimed job ends with the runner's own bookkeeping: there is no queued fallback to dismiss.
  return (job) => executor.execute(CompanyId.make(job.companyId), job.payload.runId, job.payload.segment, job.attempt === 1 && job.payload.segment > 0, null)
}))

import { Clock, Context, DateTime, Effect, Layer, Option } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { type CompanyId, type CurrentActor, CurrentActor as Actor, requireFeature, requirePermission } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { Media } from "../media/Media.ts"
import { limitOf, MessagingLimit } from "../messages/MessagingLimit.ts"
import { Outbound } from "../messages/Outbound.ts"
import {
  BadGateway,
  type FeatureNotAvailable,
  type Forbidden,
  invalidFields,
  type NotFound,
  notFound,
  ruleViolation,
  ServiceUnavailable,
  type TooManyRequests,
  type Unprocessable, orNotFound } from "../platform/Errors.ts"
import { Jobs } from "../platform/Jobs.ts"
import { offsetOf } from "../platform/Pagination.ts"
import { inSnapshot } from "../platform/Sql.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { definitionOf, memberCount, memberIds } from "../segments/Compiler.ts"
import { TemplateSending } from "../templates/Sending.ts"
import { Assist } from "./Assist.ts"
import type { AssistInput, Broadcast, BroadcastInput, BroadcastPatch, Estimate, EstimateInput, Recipient, Run, Stats } from "./Domain.ts"
import { contactVariables } from "./Domain.ts"
import { RunEngine, windowOf } from "./Engine.ts"
import { RunJob, StartJob } from "./Kinds.ts"
import { nextOccurrence, parse as parseRule, validTimezone } from "./Recurrence.ts"
import { type BroadcastFields, type BroadcastRow, BroadcastsRepo, type Counts, emptyCounts, type RunRow, toRun } from "./Repo.ts"

type Gate = Forbidden | FeatureNotAvailable
const broadcastNotFound = () => notFound("Broadcast not found.")
const runNotFound = () => notFound("Run not found.")
const maxContentBytes = 64 * 1024

/** Sends per second assumed for a channel without rate control when estimating (the sandbox default ceiling). */
const defaultPerSecond: Record<string, number> = { whatsapp_cloud: 80, telegram: 30, sandbox: 1000 }

const counted = (c: Counts) => ({
  total: c.total,
  sent: c.sent,
  delivered: c.delivered,
  read: c.read,
  failed: c.failed,
  skipped: c.skipped,
  clicked: c.clicked,
  replied: c.replied
})

const segmentNumber = (id: string) => /^\d{1,15}$/.test(id) ? Number(id) : null

export class Broadcasts extends Context.Service<Broadcasts, {
  meta(): Effect.Effect<{ segments: ReadonlyArray<{ id: string; name: string }>; variables: ReadonlyArray<string>; templates: ReadonlyArray<unknown> }, Gate, CurrentActor>
  list(page: number, perPage: number, statuses: ReadonlyArray<string>): Effect.Effect<{ items: ReadonlyArray<Broadcast>; pagination: { page: number; perPage: number; total: number; lastPage: number } }, Gate, CurrentActor>
  get(id: number): Effect.Effect<Broadcast, Gate | NotFound, CurrentActor>
  create(input: BroadcastInput): Effect.Effect<Broadcast, Gate | Unprocessable, CurrentActor>
  update(id: number, input: BroadcastPatch): Effect.Effect<Broadcast, Gate | NotFound | Unprocessable, CurrentActor>
  delete(id: number): Effect.Effect<void, Gate | NotFound, CurrentActor>
  estimate(input: EstimateInput): Effect.Effect<Estimate, Gate | Unprocessable, CurrentActor>
  duplicate(id: number): Effect.Effect<Broadcast, Gate | NotFound, CurrentActor>
  publish(id: number): Effect.Effect<Broadcast, Gate | NotFound | Unprocessable, CurrentActor>
  cancel(id: number): Effect.Effect<Broadcast, Gate | NotFound | Unprocessable, CurrentActor>
  run(id: number): Effect.Effect<Broadcast, Gate | NotFound | Unprocessable, CurrentActor>
  recipients(id: number, status: string | null, page: number, perPage: number): Effect.Effect<{ data: ReadonlyArray<Recipient>; meta: { current_page: number; last_page: number; per_page: number; total: number } }, Gate | NotFound, CurrentActor>
  runs(id: number): Effect.Effect<ReadonlyArray<Run>, Gate | NotFound, CurrentActor>
  getRun(id: number, runId: number): Effect.Effect<Run, Gate | NotFound, CurrentActor>
  pauseRecurring(id: number): Effect.Effect<Broadcast, Gate | NotFound | Unprocessable, CurrentActor>
  resumeRecurring(id: number): Effect.Effect<Broadcast, Gate | NotFound | Unprocessable, CurrentActor>
  runControl(id: number, runId: number, action: "pause" | "resume" | "cancel" | "retry-failed"): Effect.Effect<Run, Gate | NotFound | Unprocessable, CurrentActor>
  test(input: { channel_id: number; recipient: string; content: { type: "text"; text: string } }): Effect.Effect<{ message: string; message_id: number }, Gate | NotFound | Unprocessable | ServiceUnavailable | import("../platform/Errors.ts").Conflict, CurrentActor>
  assist(input: AssistInput): Effect.Effect<{ text: string; action: string; tokens_used: number }, Gate | ServiceUnavailable | BadGateway | TooManyRequests, CurrentActor>
  /** A click on a tracked link: the original URL (None: unknown code). */
  click(code: string): Effect.Effect<Option.Option<string>>
  /** The durable timer fired: starts the occurrence `at` unless the timer has moved since. */
  fire(companyId: CompanyId, broadcastId: number, at: string): Effect.Effect<void>
}>()("crm/broadcasts/Broadcasts") {
  static readonly layerNoDeps = Layer.effect(
    Broadcasts,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* BroadcastsRepo
      const events = yield* Events
      const jobs = yield* Jobs
      const engine = yield* RunEngine
      const outbound = yield* Outbound
      const limiter = yield* RateLimiter
      const assistant = yield* Assist
      const templates = yield* TemplateSending
      const limits = yield* MessagingLimit
      const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      const gate = (permission: string) => Effect.andThen(requireFeature("broadcasts"), requirePermission(permission))

      const toBroadcast = Effect.fnUntraced(function*(companyId: CompanyId, row: BroadcastRow) {
        const runs = yield* repo.runsOf(companyId, [row.id])
        const perRun = new Map((yield* repo.counts(companyId, [row.id], "run")).map((c) => [Number(c.key), c]))
        const byVariant = yield* repo.counts(companyId, [row.id], "variant")
        const total = (yield* repo.counts(companyId, [row.id], "broadcast"))[0] ?? emptyCounts
        const segment = row.segment_id === null ? Option.none() : yield* repo.segment(companyId, row.segment_id)
        const stats: Stats = {
          ...counted(total),
          byVariant: Object.fromEntries(byVariant.filter((c) => c.key !== "").map((c) => [c.key, counted(c)]))
        }
        return {
          id: row.id,
          company_id: row.company_id,
          name: row.name,
          status: row.status,
          audience: {
            segmentId: row.segment_id === null ? null : String(row.segment_id),
            conditions: Option.match(segment, { onNone: () => [], onSome: (s) => s.conditions }),
            group_logic: Option.match(segment, { onNone: () => null, onSome: (s) => s.group_logic })
          },
          channels: row.channel_ids.map((id) => ({ id, mode: "specific" })),
          content: row.content,
          schedule: row.schedule,
          recurring_schedule: row.recurrence === null ? null : {
            rrule: row.recurrence.rrule,
            timezone: row.recurrence.timezone ?? "UTC",
            paused: row.recurring_paused,
            next_run_at: row.next_run_at?.toISOString() ?? null
          },
          runs: runs.map((run) => toRun(run, perRun.get(run.id) ?? emptyCounts)),
          stats,
          created_at: row.created_at.toISOString(),
          updated_at: row.updated_at.toISOString()
        } satisfies Broadcast
      })

      const load = Effect.fnUntraced(function*(companyId: CompanyId, id: number, forUpdate = false) {
        const row = yield* repo.find(companyId, id, forUpdate)
        if (Option.isNone(row)) return yield* broadcastNotFound()
        return row.value
      })

      const show = (companyId: CompanyId, id: number) =>
        inSnapshot(sql, Effect.flatMap(load(companyId, id), (row) => toBroadcast(companyId, row)))

      /** Field checks beyond the schema: the segment, channels and content must be the company's and fit together. */
      const check = Effect.fnUntraced(function*(companyId: CompanyId, f: Omit<BroadcastFields, "status">, scheduledAt: string | null | undefined) {
        const errors: Record<string, Array<string>> = {}
        const add = (field: string, message: string) => (errors[field] ??= []).push(message)
        if (f.segmentId === null || Option.isNone(yield* repo.segment(companyId, f.segmentId))) {
          add("audience.segmentId", "The selected audience.segmentId is invalid.")
        }
        const channels = yield* repo.channels(companyId, f.channelIds)
        if (channels.length !== new Set(f.channelIds).size) add("channels.channelIds", "The selected channels.channelIds is invalid.")
        if (f.content.channels.length === 0) add("content.channels", "The content.channels field must have at least 1 item.")
        f.content.channels.forEach((entry, i) => {
          const at = `content.channels.${i}`
          if (!f.channelIds.includes(entry.channelId)) add(`${at}.channelId`, `The ${at}.channelId must be one of channels.channelIds.`)
          if (entry.type === "template") {
            if (entry.templateId === undefined || entry.templateId === null) add(`${at}.templateId`, `The ${at}.templateId field is required for a template.`)
            return
          }
          const variants = entry.variants ?? []
          if (variants.length > 0 && (variants.length < 2 || variants.length > 3)) add(`${at}.variants`, `The ${at}.variants field must have 2 to 3 items.`)
          if (new Set(variants.map((v) => v.key)).size !== variants.length) add(`${at}.variants`, `The ${at}.variants keys must be distinct.`)
          if (variants.length === 0 && !(entry.text ?? "").trim()) add(`${at}.text`, `The ${at}.text field is required when there are no variants.`)
        })
        if (JSON.stringify(f.content).length > maxContentBytes) add("content", "The content field must not be greater than 64 KB.")
        const rate = f.schedule.rateControl
        if (rate && (rate.jitterMaxSeconds ?? 0) < (rate.jitterMinSeconds ?? 0)) {
          add("schedule.rateControl.jitterMaxSeconds", "The jitterMaxSeconds must be greater than or equal to jitterMinSeconds.")
        }
        const zone = f.schedule.sendWindow?.timezone
        if (zone && zone !== "recipient" && !validTimezone(zone)) add("schedule.sendWindow.timezone", "The schedule.sendWindow.timezone must be 'recipient' or a time zone.")
        if (f.schedule.mode === "later") {
          if (!scheduledAt || Number.isNaN(Date.parse(scheduledAt))) add("schedule.scheduledAt", "The schedule.scheduledAt field must be a valid date when mode is later.")
        }
        if (f.recurrence !== null) {
          const zone = f.recurrence.timezone ?? "UTC"
          if (!validTimezone(zone)) add("recurrence.timezone", "The recurrence.timezone must be a time zone.")
          else if (Option.isNone(parseRule(f.recurrence.rrule, zone, new Date()))) add("recurrence.rrule", "The recurrence.rrule must be an RFC 5545 RRULE.")
        }
        if (Object.keys(errors).length > 0) return yield* invalidFields(errors)
      })

      /** Rule 3: every template entry needs an approved instance on its channel. */
      const templateCheck = Effect.fnUntraced(function*(companyId: CompanyId, row: { readonly content: BroadcastRow["content"] }) {
        const entries = row.content.channels.filter((e) => e.type === "template")
        if (entries.length === 0) return
        for (const entry of entries) {
          const templateId = entry.templateId ?? 0
          const approved = yield* templates.approved(companyId, { templateId, channelId: entry.channelId, language: entry.language ?? undefined }).pipe(Effect.option)
          if (Option.isSome(approved)) continue
          const [channel] = yield* repo.channels(companyId, [entry.channelId])
          const ref = yield* repo.templateRef(companyId, templateId, entry.language ?? null)
          const slug = Option.match(ref, { onNone: () => String(templateId), onSome: (r) => r.slug })
          const language = Option.match(ref, { onNone: () => entry.language ?? "en", onSome: (r) => r.language })
          return yield* invalidFields({
            content: [
              `Channel '${channel?.name ?? entry.channelId}' has no approved template '${slug}' (language ${language}). ` +
              "Approve this template for the channel or pick a channel where it is approved."
            ]
          })
        }
      })

      const emitUpdated = (companyId: CompanyId, row: { readonly id: number; readonly name: string }, status: string) =>
        events.emit(companyId, "broadcast.updated", { broadcast: { id: row.id, name: row.name, status } })

      /** Arms the durable timer at `at` (null disarms it): a start job for that instant; older jobs see a moved timer and stop. */
      const arm = Effect.fnUntraced(function*(companyId: CompanyId, id: number, at: Date | null, paused: boolean) {
        yield* repo.setTimer(companyId, id, at, paused, yield* nowDate)
        if (at !== null && !paused) {
          yield* jobs.enqueue(StartJob, companyId, { broadcast_id: id, at: at.toISOString() }, { runAfter: DateTime.makeUnsafe(at) })
        }
      })

      const firstOccurrence = (row: { readonly recurrence: BroadcastRow["recurrence"]; readonly schedule: BroadcastRow["schedule"]; readonly created_at: Date }, now: Date) => {
        if (row.recurrence === null) return Option.none()
        const from = row.schedule.mode === "later" && row.schedule.scheduledAt ? new Date(Math.max(now.getTime(), Date.parse(row.schedule.scheduledAt))) : now
        return nextOccurrence(row.recurrence.rrule, row.recurrence.timezone ?? "UTC", row.created_at, from, true)
      }

      /** Launch or schedule (create without draft, publish). */
      const launch = Effect.fnUntraced(function*(companyId: CompanyId, row: BroadcastRow) {
        const now = yield* nowDate
        if (row.recurrence !== null) {
          yield* repo.setStatus(companyId, row.id, "scheduled", now)
          yield* arm(companyId, row.id, Option.getOrNull(firstOccurrence(row, now)), false)
        } else if (row.schedule.mode === "later" && row.schedule.scheduledAt && Date.parse(row.schedule.scheduledAt) > now.getTime()) {
          yield* repo.setStatus(companyId, row.id, "scheduled", now)
          yield* arm(companyId, row.id, new Date(row.schedule.scheduledAt), false)
        } else {
          yield* templateCheck(companyId, row)
          yield* engine.start(companyId, row)
        }
      })

      const fieldsOf = (input: BroadcastInput) => ({
        name: input.name.trim(),
        segmentId: segmentNumber(input.audience.segmentId),
        channelIds: input.channels.channelIds,
        content: input.content,
        schedule: input.schedule,
        recurrence: input.recurrence ?? null
      })

      const meta = Effect.fn("Broadcasts.meta")(function*() {
        const company = yield* gate("broadcast.view")
        const segments = yield* repo.segments(company.id)
        const templates = yield* repo.approvedTemplates(company.id)
        return { segments: segments.map((s) => ({ id: String(s.id), name: s.name })), variables: [...contactVariables], templates }
      })

      const list = Effect.fn("Broadcasts.list")(function*(page: number, perPage: number, statuses: ReadonlyArray<string>) {
        const company = yield* gate("broadcast.view")
        return yield* inSnapshot(sql, Effect.gen(function*() {
          const { rows, total } = yield* repo.page(company.id, statuses, perPage, offsetOf(page, perPage))
          const items = yield* Effect.forEach(rows, (row) => toBroadcast(company.id, row))
          return { items, pagination: { page, perPage, total, lastPage: Math.max(1, Math.ceil(total / perPage)) } }
        }))
      })

      const get = Effect.fn("Broadcasts.get")(function*(id: number) {
        const company = yield* gate("broadcast.view")
        return yield* show(company.id, id)
      })

      const create = Effect.fn("Broadcasts.create")(function*(input: BroadcastInput) {
        const company = yield* gate("broadcast.create")
        const actor = yield* Actor
        const fields = fieldsOf(input)
        yield* check(company.id, fields, input.schedule.scheduledAt)
        const draft = input.is_draft === true
        if (!draft && input.schedule.mode === "now" && fields.recurrence === null) yield* templateCheck(company.id, fields)
        const id = yield* Effect.gen(function*() {
          const now = yield* nowDate
          const id = yield* repo.insert(company.id, actor.userId, { ...fields, status: draft ? "draft" : "scheduled" }, now)
          yield* events.emit(company.id, "broadcast.created", { broadcast: { id, name: fields.name, status: draft ? "draft" : "scheduled" } })
          if (!draft) yield* launch(company.id, yield* orNotFound(yield* repo.find(company.id, id)))
          return id
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
        return yield* show(company.id, id)
      })

      const editable = new Set(["draft", "scheduled"])

      const update = Effect.fn("Broadcasts.update")(function*(id: number, patch: BroadcastPatch) {
        const company = yield* gate("broadcast.update")
        yield* Effect.gen(function*() {
          const row = yield* load(company.id, id, true)
          if (!editable.has(row.status)) {
            return yield* ruleViolation("broadcast_not_editable", "Only a draft or scheduled broadcast can be changed.")
          }
          const fields = {
            name: patch.name?.trim() ?? row.name,
            segmentId: patch.audience === undefined ? row.segment_id : segmentNumber(patch.audience.segmentId),
            channelIds: patch.channels?.channelIds ?? row.channel_ids,
            content: patch.content ?? row.content,
            schedule: patch.schedule ?? row.schedule,
            recurrence: patch.recurrence === undefined ? row.recurrence : patch.recurrence
          }
          yield* check(company.id, fields, fields.schedule.scheduledAt)
          const now = yield* nowDate
          yield* repo.update(company.id, id, { ...fields, status: row.status }, now)
          if (row.status === "scheduled") yield* launch(company.id, yield* orNotFound(yield* repo.find(company.id, id)))
          yield* emitUpdated(company.id, { id, name: fields.name }, row.status)
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
        return yield* show(company.id, id)
      })

      const stopRun = Effect.fnUntraced(function*(companyId: CompanyId, run: RunRow, status: "cancelled", reason: string) {
        const now = yield* nowDate
        yield* repo.skipPending(companyId, run.id, reason)
        yield* repo.setRunStatus(companyId, run.id, status, now)
        yield* events.emit(companyId, "broadcast.run.finished", { broadcast_id: run.broadcast_id, run_id: run.id, status })
      })

      const remove = Effect.fn("Broadcasts.delete")(function*(id: number) {
        const company = yield* gate("broadcast.delete")
        yield* Effect.gen(function*() {
          yield* load(company.id, id, true)
          for (const run of yield* repo.activeRuns(company.id, id)) yield* stopRun(company.id, run, "cancelled", "cancelled")
          yield* repo.softDelete(company.id, id, yield* nowDate)
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
      })

      const estimate = Effect.fn("Broadcasts.estimate")(function*(input: EstimateInput) {
        const company = yield* gate("broadcast.view")
        const segmentId = segmentNumber(input.segment_id)
        const segment = segmentId === null ? Option.none() : yield* repo.segment(company.id, segmentId)
        const channels = yield* repo.channels(company.id, input.channel_ids)
        const errors: Record<string, Array<string>> = {}
        if (Option.isNone(segment)) errors.segment_id = ["The selected segment id is invalid."]
        if (channels.length !== new Set(input.channel_ids).size) errors.channel_ids = ["The selected channel ids is invalid."]
        if (Object.keys(errors).length > 0 || Option.isNone(segment)) return yield* invalidFields(errors)
        const definition = yield* definitionOf(segment.value)
        const [{ count: total }] = yield* Effect.flatMap(memberCount(company.id, definition), (s) => s.unprepared).pipe(
          Effect.orDie,
          Effect.provideService(SqlClient.SqlClient, sql)
        )
        const members = yield* memberIds(company.id, definition).pipe(Effect.provideService(SqlClient.SqlClient, sql))
        const perChannel = yield* repo.reachable(company.id, members, input.channel_ids)
        const reachable = perChannel.reduce((sum, c) => sum + c.count, 0)
        const rate = input.schedule?.rateControl
        const pace = rate && rate.enabled !== false ? rate : null
        const seconds = Math.max(0, ...perChannel.map((c) => {
          const channel = channels.find((ch) => ch.id === Number(c.channel_id))
          const ceiling = Number(channel?.settings.sends_per_second) || defaultPerSecond[channel?.provider ?? "sandbox"] || 1000
          let perSecond = pace?.messagesPerMinute ? Math.min(ceiling, pace.messagesPerMinute / 60) : ceiling
          const jitter = pace ? ((pace.jitterMinSeconds ?? 0) + (pace.jitterMaxSeconds ?? 0)) / 2 : 0
          if (jitter > 0) perSecond = 1 / (1 / perSecond + jitter)
          let duration = c.count / perSecond
          if (pace?.dailyLimit) duration += Math.floor((c.count - 1) / pace.dailyLimit) * 86_400
          return Math.ceil(duration)
        }))
        const window = windowOf(input.schedule?.sendWindow)
        // A window open `open` minutes a day stretches the sending time by the closed part.
        const open = window === null ? 1440 : window.start <= window.end ? window.end - window.start : 1440 - window.start + window.end
        const duration = open >= 1440 || open <= 0 ? seconds : Math.ceil(seconds * 1440 / open)
        const now = yield* nowDate
        return {
          total_contacts: total,
          reachable_contacts: reachable,
          excluded_contacts: Math.max(0, total - reachable),
          estimated_duration_seconds: duration,
          estimated_completion: new Date(now.getTime() + duration * 1000).toISOString(),
          messaging_limits: yield* messagingLimits(company.id, members, input.channel_ids, channels)
        }
      })

      /** Each selected channel with a messaging limit, against the recipients the audience would have on it. */
      const messagingLimits = (
        companyId: CompanyId,
        members: Statement.Statement<{ readonly id: number }>,
        channelIds: ReadonlyArray<number>,
        channels: ReadonlyArray<{ readonly id: number; readonly settings: Record<string, unknown> }>
      ) =>
        Effect.forEach([...new Set(channelIds)], (channelId) =>
          channels.some((ch) => ch.id === channelId && limitOf(ch.settings) !== null)
            ? Effect.flatMap(repo.reachableAccounts(companyId, members, channelIds, channelId), (accounts) => limits.outlook(companyId, channelId, accounts))
            : Effect.succeedNone).pipe(Effect.map((all) => all.flatMap(Option.toArray)))

      const duplicate = Effect.fn("Broadcasts.duplicate")(function*(id: number) {
        const company = yield* gate("broadcast.create")
        const actor = yield* Actor
        const row = yield* load(company.id, id)
        const copy = yield* Effect.gen(function*() {
          const name = `${row.name} (copy)`.slice(0, 255)
          const copy = yield* repo.insert(company.id, actor.userId, { ...row, name, status: "draft", segmentId: row.segment_id, channelIds: row.channel_ids }, yield* nowDate)
          yield* events.emit(company.id, "broadcast.created", { broadcast: { id: copy, name, status: "draft" } })
          return copy
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
        return yield* show(company.id, copy)
      })

      const publish = Effect.fn("Broadcasts.publish")(function*(id: number) {
        const company = yield* gate("broadcast.update")
        yield* Effect.gen(function*() {
          const row = yield* load(company.id, id, true)
          if (row.status !== "draft") return yield* ruleViolation("broadcast_not_draft", "Only a draft broadcast can be published.")
          yield* check(company.id, { ...row, segmentId: row.segment_id, channelIds: row.channel_ids }, row.schedule.scheduledAt)
          yield* templateCheck(company.id, row)
          yield* launch(company.id, row)
          yield* emitUpdated(company.id, row, "published")
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
        return yield* show(company.id, id)
      })

      const cancel = Effect.fn("Broadcasts.cancel")(function*(id: number) {
        const company = yield* gate("broadcast.update")
        yield* Effect.gen(function*() {
          const row = yield* load(company.id, id, true)
          if (row.recurrence !== null) {
            return yield* ruleViolation("broadcast_recurring", "A recurring broadcast is stopped with pause-recurring, not cancel.")
          }
          if (!["draft", "scheduled", "active"].includes(row.status)) {
            return yield* ruleViolation("broadcast_not_cancellable", `A ${row.status} broadcast cannot be cancelled.`)
          }
          for (const run of yield* repo.activeRuns(company.id, id)) yield* stopRun(company.id, run, "cancelled", "cancelled")
          yield* repo.setStatus(company.id, id, "cancelled", yield* nowDate)
          yield* repo.setTimer(company.id, id, null, false, yield* nowDate)
          yield* emitUpdated(company.id, row, "cancelled")
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
        return yield* show(company.id, id)
      })

      const run = Effect.fn("Broadcasts.run")(function*(id: number) {
        const company = yield* gate("broadcast.update")
        yield* Effect.gen(function*() {
          const row = yield* load(company.id, id, true)
          if (!["scheduled", "completed", "failed"].includes(row.status)) {
            return yield* ruleViolation("broadcast_not_runnable", `A ${row.status} broadcast cannot be run.`)
          }
          if ((yield* repo.activeRuns(company.id, id)).length > 0) {
            return yield* ruleViolation("broadcast_running", "The broadcast already has a run in progress.")
          }
          yield* templateCheck(company.id, row)
          if (row.recurrence === null) yield* repo.setTimer(company.id, id, null, false, yield* nowDate)
          yield* engine.start(company.id, row)
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
        return yield* show(company.id, id)
      })

      const recipients = Effect.fn("Broadcasts.recipients")(function*(id: number, status: string | null, page: number, perPage: number) {
        const company = yield* gate("broadcast.view")
        yield* load(company.id, id)
        const { rows, total } = yield* repo.recipients(company.id, id, status, perPage, offsetOf(page, perPage))
        return { data: rows, meta: { current_page: page, last_page: Math.max(1, Math.ceil(total / perPage)), per_page: perPage, total } }
      })

      const runOf = Effect.fnUntraced(function*(companyId: CompanyId, id: number, runId: number) {
        yield* load(companyId, id)
        const row = yield* repo.findRun(companyId, id, runId)
        if (Option.isNone(row)) return yield* runNotFound()
        const counts = (yield* repo.counts(companyId, [id], "run")).find((c) => Number(c.key) === runId) ?? emptyCounts
        return toRun(row.value, counts)
      })

      const runs = Effect.fn("Broadcasts.runs")(function*(id: number) {
        const company = yield* gate("broadcast.view")
        return (yield* show(company.id, id)).runs
      })

      const getRun = Effect.fn("Broadcasts.getRun")(function*(id: number, runId: number) {
        const company = yield* gate("broadcast.view")
        return yield* runOf(company.id, id, runId)
      })

      const recurring = Effect.fnUntraced(function*(id: number, paused: boolean) {
        const company = yield* gate("broadcast.update")
        yield* Effect.gen(function*() {
          const row = yield* load(company.id, id, true)
          if (row.recurrence === null) return yield* ruleViolation("broadcast_not_recurring", "The broadcast has no recurring schedule.")
          if (row.status === "draft" || row.status === "cancelled") {
            return yield* ruleViolation("broadcast_not_scheduled", `A ${row.status} broadcast has no running schedule.`)
          }
          const now = yield* nowDate
          const next = paused ? row.next_run_at : Option.getOrNull(nextOccurrence(row.recurrence.rrule, row.recurrence.timezone ?? "UTC", row.created_at, now))
          yield* arm(company.id, id, next, paused)
          yield* emitUpdated(company.id, row, row.status)
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
        return yield* show(company.id, id)
      })

      const runControl = Effect.fn("Broadcasts.runControl")(function*(id: number, runId: number, action: "pause" | "resume" | "cancel" | "retry-failed") {
        const company = yield* gate("broadcast.update")
        yield* Effect.gen(function*() {
          const row = yield* load(company.id, id, true)
          const found = yield* repo.findRun(company.id, id, runId, true)
          if (Option.isNone(found)) return yield* runNotFound()
          const run = found.value
          const now = yield* nowDate
          const refuse = (message: string) => ruleViolation("run_state", message)
          switch (action) {
            case "pause":
              if (run.status !== "processing") return yield* refuse(`A ${run.status} run cannot be paused.`)
              return yield* repo.setRunStatus(company.id, runId, "paused", null)
            case "resume":
              if (run.status !== "paused") return yield* refuse(`A ${run.status} run cannot be resumed.`)
              yield* repo.setRunStatus(company.id, runId, "processing", null)
              return yield* jobs.enqueue(RunJob, company.id, { run_id: runId })
            case "cancel": {
              if (run.status !== "processing" && run.status !== "paused") return yield* refuse(`A ${run.status} run cannot be cancelled.`)
              yield* stopRun(company.id, run, "cancelled", "cancelled")
              if ((yield* repo.activeRuns(company.id, id)).length === 0 && row.status === "active") {
                yield* repo.setStatus(company.id, id, row.recurrence !== null && row.next_run_at !== null ? "scheduled" : "cancelled", now)
              }
              return
            }
            case "retry-failed": {
              if (run.status === "processing" || run.status === "paused") return yield* refuse("The run is still in progress.")
              const retried = yield* repo.retryFailed(company.id, runId)
              if (retried === 0) return yield* refuse("The run has no failed recipients.")
              yield* repo.setRunStatus(company.id, runId, "processing", null)
              yield* repo.setStatus(company.id, id, "scheduled", now)
              yield* emitUpdated(company.id, row, "scheduled")
              return yield* jobs.enqueue(RunJob, company.id, { run_id: runId })
            }
          }
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
        return yield* runOf(company.id, id, runId)
      })

      const test = Effect.fn("Broadcasts.test")(function*(input: { channel_id: number; recipient: string; content: { type: "text"; text: string } }) {
        yield* gate("broadcast.create")
        const message = yield* outbound.send({ channel_id: input.channel_id, to: { external_id: input.recipient }, text: input.content.text }, undefined)
        return { message: "Test message sent.", message_id: message.id }
      })

      const assist = Effect.fn("Broadcasts.assist")(function*(input: AssistInput) {
        const company = yield* gate("broadcast.create")
        const answer = yield* limiter.enforce({ companyId: company.id }, "assist", { limit: 60, windowSeconds: 3600 }).pipe(
          Effect.andThen(assistant.complete(input.action, input.text, input.locale ?? null)),
          Effect.catchTag("AssistUnavailable", (e) =>
            Effect.fail(e.reason === "not_configured" ? new ServiceUnavailable({ message: e.message }) : new BadGateway({ message: e.message })))
        )
        return { text: answer.text, action: input.action, tokens_used: answer.tokensUsed }
      })

      const click = (code: string) =>
        Effect.flatMap(nowDate, (now) => /^[0-9A-Za-z]{10,32}$/.test(code) ? repo.click(code, now) : Effect.succeed(Option.none()))

      const fire = Effect.fn("Broadcasts.fire")(function*(companyId: CompanyId, broadcastId: number, at: string) {
        yield* Effect.gen(function*() {
          const row = yield* repo.find(companyId, broadcastId, true)
          if (Option.isNone(row)) return
          const b = row.value
          if (b.next_run_at === null || b.next_run_at.toISOString() !== at || b.recurring_paused) return
          if (b.status !== "scheduled" && b.status !== "active" && b.status !== "completed" && b.status !== "failed") return
          if (b.recurrence !== null) {
            yield* arm(companyId, broadcastId, Option.getOrNull(nextOccurrence(b.recurrence.rrule, b.recurrence.timezone ?? "UTC", b.created_at, new Date(at))), false)
          } else {
            yield* repo.setTimer(companyId, broadcastId, null, false, yield* nowDate)
          }
          if ((yield* repo.activeRuns(companyId, broadcastId)).length > 0) return
          yield* engine.start(companyId, yield* orNotFound(yield* repo.find(companyId, broadcastId)))
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      return Broadcasts.of({
        meta,
        list,
        get,
        create,
        update,
        delete: remove,
        estimate,
        duplicate,
        publish,
        cancel,
        run,
        recipients,
        runs,
        getRun,
        pauseRecurring: (id) => recurring(id, true),
        resumeRecurring: (id) => recurring(id, false),
        runControl,
        test,
        assist,
        click,
        fire
      })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide([RunEngine.layer, Assist.layer]),
    Layer.provide([BroadcastsRepo.layer, Outbound.layer, TemplateSending.layer, MessagingLimit.layer]),
    Layer.provide(Media.layer)
  )
}

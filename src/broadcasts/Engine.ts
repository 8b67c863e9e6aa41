import { type Cause, Clock, Context, Effect, Fiber, Layer, Option, Queue, Random, Result } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { CompanyId } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { MessagingLimit } from "../messages/MessagingLimit.ts"
import { type BatchItem, type BatchResult, Send } from "../messages/Send.ts"
import { AppConfig } from "../platform/Config.ts"
import { Jobs } from "../platform/Jobs.ts"
import { definitionOf, memberIds } from "../segments/Compiler.ts"
import { type ApprovedTemplate, templateContent, type TemplateRefusal, TemplateSending } from "../templates/Sending.ts"
import { render, trackLinks, withOptOut } from "./Content.ts"
import type { ChannelContent, SendWindow } from "./Domain.ts"
import { RunJob } from "./Kinds.ts"
import { admit, newPacer, nextSlot, type Pace, paceOf, type PacerState, planSlots, unpaced } from "./Pacing.ts"
import { type BroadcastRow, BroadcastsRepo, type Counts, emptyCounts, pickChannel } from "./Repo.ts"
import { idArray } from "../platform/Sql.ts"

/** Recipients claimed at once per channel for paced sends (the slots of the next `maxIdleMs`). */
const batchSize = 64
/**
 * Unpaced channels (only the provider ceiling paces them) run in lanes: a lane claims and sends
 * batch after batch until its channel has nothing claimable, so the database is never idle waiting
 * for the slowest batch of a round. A batch starts at `firstBatch` recipients and doubles after two
 * batches in a row took under `batchTargetMs` (it never shrinks: a loaded database slows every
 * batch, and smaller ones would only add round trips); a channel fast enough for batches of
 * `parallelFrom` runs its share of `lanesPerRun` lanes. A batch is claimed (`sending`) before its provider
 * calls, so on a slow provider ceiling this keeps what a crash leaves `outcome_unknown` to about a
 * second of the channel's sends.
 */
const firstBatch = 32
const maxBatch = 500
const batchTargetMs = 400
const batchesInFlight = 4
/** Lanes of one run across its channels: each open channel gets its share, at least one (the last channel open gets them all). */
const lanesPerRun = 8
const parallelFrom = 256
/** The longest the engine sleeps before it looks at the run's status again (pause, cancel). */
const maxIdleMs = 1000
const progressEveryMs = 1000

interface Claimed {
  readonly id: number
  readonly contact_id: number
  readonly channel_id: number
  readonly contact_account_id: number
  readonly variant_key: string | null
  readonly first_name: string | null
  readonly last_name: string | null
  readonly display_name: string | null
  readonly company_name: string | null
  readonly opted_out: boolean
  readonly blocked: boolean
  readonly recent: boolean
}

interface Outcome {
  readonly id: number
  readonly status: "sent" | "failed" | "skipped" | "pending"
  readonly error: string | null
  readonly message_id: number | null
  /** When its send started, if it waited for a paced slot after the claim. */
  readonly sent_at?: string
}

const isOutcome = (send: BatchItem | Outcome): send is Outcome => "status" in send

const minuteOf = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5))

/** The window's bounds in minutes of the day, or null when sends may happen at any time. */
export const windowOf = (window: SendWindow | null | undefined) => {
  if (window === null || window === undefined || window.enabled !== true) return null
  const start = minuteOf(window.startTime ?? "00:00")
  const end = minuteOf(window.endTime ?? "23:59")
  return { start, end, smart: window.mode === "smart", zone: window.timezone && window.timezone !== "recipient" ? window.timezone : null }
}

const contentFor = (broadcast: BroadcastRow, channelId: number): ChannelContent | undefined =>
  broadcast.content.channels.find((entry) => entry.channelId === channelId)

/**
 * The run engine: the audience snapshot when a run starts, and `drive`, which claims recipients in
 * batches, paces them per channel and sends each batch through the batch door `Send.many`, then
 * writes the recipients' outcomes from its results (a crash in between leaves them `sending` with
 * their messages stored, which the next drive settles from). Only one `drive` of a
 * run is live at a time (the BroadcastRun entity and the run's job lease see to it), which is what
 * makes its first step, failing recipients left `sending` by a crashed driver, safe.
 */
export class RunEngine extends Context.Service<RunEngine, {
  /** Creates a run with its recipient snapshot and queues its driving, in the caller's transaction. */
  start(companyId: CompanyId, broadcast: BroadcastRow): Effect.Effect<number>
  drive(companyId: CompanyId, runId: number): Effect.Effect<void>
}>()("crm/broadcasts/RunEngine") {
  static readonly layerNoDeps = Layer.effect(
    RunEngine,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* BroadcastsRepo
      const events = yield* Events
      const jobs = yield* Jobs
      const sender = yield* Send
      const config = yield* AppConfig
      const templates = yield* TemplateSending
      const limits = yield* MessagingLimit
      const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      const countsPayload = (c: Counts) => ({
        total: c.total,
        pending: c.pending + c.sending,
        sent: c.sent,
        delivered: c.delivered,
        read: c.read,
        failed: c.failed,
        skipped: c.skipped
      })

      const snapshot = Effect.fnUntraced(function*(companyId: CompanyId, broadcast: BroadcastRow, runId: number) {
        const segment = broadcast.segment_id === null ? Option.none() : yield* repo.segment(companyId, broadcast.segment_id)
        if (Option.isNone(segment)) return
        const members = yield* memberIds(companyId, yield* definitionOf(segment.value)).pipe(Effect.provideService(SqlClient.SqlClient, sql))
        const companyTz = yield* repo.companyTimezone(companyId)
        const variants: Record<string, Array<string>> = {}
        for (const entry of broadcast.content.channels) {
          if (entry.type === "text" && entry.variants && entry.variants.length > 0) variants[String(entry.channelId)] = entry.variants.map((v) => v.key)
        }
        const window = windowOf(broadcast.schedule.sendWindow)
        const zone = window?.zone ? sql`${window.zone}::text` : sql`coalesce(z1.name, z2.name, ${companyTz}::text)`
        const keys = sql`(${JSON.stringify(variants)}::jsonb -> pick.channel_id::text)`
        const preferred = window?.smart
          ? sql`(SELECT (extract(hour FROM i."timestamp" AT TIME ZONE ${zone}))::int * 60
              FROM conversations cv JOIN messages i ON i.company_id = ${companyId} AND i.conversation_id = cv.id AND i.direction = 'inbound'
              WHERE cv.company_id = ${companyId} AND cv.contact_id = c.id
              GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1)`
          : sql`NULL::int`
        // The variant: 28 bits of md5(broadcast:contact), so the same pair always gets the same key.
        yield* sql`
          WITH zones AS MATERIALIZED (SELECT name FROM pg_timezone_names)
          INSERT INTO broadcast_recipients (company_id, broadcast_id, run_id, contact_id, channel_id, contact_account_id, identifier,
            variant_key, timezone, preferred_minute)
          SELECT ${companyId}, ${broadcast.id}, ${runId}, c.id, pick.channel_id, pick.account_id, pick.external_id,
            CASE WHEN ${keys} IS NOT NULL THEN ${keys} ->> (
              ('x0' || substr(md5(${String(broadcast.id)}::text || ':' || c.id::text), 1, 7))::bit(32)::int % jsonb_array_length(${keys})
            ) END,
            ${zone}, ${preferred}
          FROM (${members}) mem
          JOIN contacts c ON c.id = mem.id AND c.company_id = ${companyId}
          CROSS JOIN LATERAL (${pickChannel(sql, companyId, broadcast.channel_ids)}) pick
          LEFT JOIN zones z1 ON z1.name = c.timezone
          LEFT JOIN zones z2 ON z2.name = c.custom_fields ->> 'timezone'
          WHERE c.opted_out_at IS NULL AND c.blocked_at IS NULL
          ON CONFLICT (run_id, contact_id) DO NOTHING`.unprepared
      }, Effect.orDie)

      const start = Effect.fn("RunEngine.start")(function*(companyId: CompanyId, broadcast: BroadcastRow) {
        const now = yield* nowDate
        const runId = yield* repo.insertRun(companyId, broadcast.id, now)
        yield* snapshot(companyId, broadcast, runId)
        const total = yield* repo.setRunTotal(companyId, runId)
        yield* repo.setStatus(companyId, broadcast.id, "active", now)
        yield* events.emit(companyId, "broadcast.run.started", { broadcast_id: broadcast.id, run_id: runId, total })
        yield* jobs.enqueue(RunJob, companyId, { run_id: runId })
        return runId
      })

      const finish = Effect.fnUntraced(function*(companyId: CompanyId, broadcastId: number, runId: number) {
        const now = yield* nowDate
        const run = yield* repo.findRun(companyId, broadcastId, runId, true)
        if (Option.isNone(run) || run.value.status !== "processing") return
        const counts = yield* repo.runCounts(companyId, runId)
        if (counts.pending + counts.sending > 0) return
        const allFailed = counts.total > 0 && counts.failed + counts.skipped === counts.total
        const status = allFailed ? "failed" : "completed"
        yield* repo.setRunStatus(companyId, runId, status, now)
        const broadcast = yield* repo.find(companyId, broadcastId, true)
        if (Option.isSome(broadcast) && broadcast.value.status === "active") {
          const others = (yield* repo.activeRuns(companyId, broadcastId)).filter((r) => r.id !== runId)
          if (others.length === 0) {
            const next = broadcast.value.recurrence !== null && broadcast.value.next_run_at !== null
            yield* repo.setStatus(companyId, broadcastId, next ? "scheduled" : allFailed ? "failed" : "completed", now)
          }
        }
        yield* events.emit(companyId, "broadcast.run.finished", { broadcast_id: broadcastId, run_id: runId, status, ...countsPayload(counts) })
      }, sql.withTransaction, Effect.orDie)

      /**
       * The recipients' outcomes as a data-modifying CTE.
       * Keyed by id with the company checked apart, as `messages/BatchRepo.ts` explains.
       */
      const outcomeWrites = (companyId: CompanyId, outcomes: ReadonlyArray<Outcome>) =>
        outcomes.length === 0 ? undefined : sql`
          recipient_values AS MATERIALIZED (
            -- Parsed once: a plan that joins it in a nested loop would parse it again per row.
            SELECT * FROM jsonb_to_recordset(${JSON.stringify(outcomes)}::jsonb) AS v(id bigint, status text, error text, message_id bigint, sent_at timestamptz)
          ), recipient_outcomes AS (
            UPDATE broadcast_recipients r SET status = v.status, error_message = v.error, message_id = v.message_id,
              sent_at = CASE WHEN v.status IN ('skipped', 'pending') THEN NULL ELSE coalesce(v.sent_at, r.sent_at) END
            FROM recipient_values v
            WHERE r.id = v.id AND r.company_id IS NOT DISTINCT FROM ${companyId}::bigint AND r.status = 'sending'
          )`

      const writeOutcomes = (companyId: CompanyId, outcomes: ReadonlyArray<Outcome>) => {
        const writes = outcomeWrites(companyId, outcomes)
        return writes === undefined ? Effect.void : sql`WITH ${writes} SELECT 1`.unprepared.pipe(Effect.asVoid, Effect.orDie)
      }

      /** A recipient's outcome from its batched send: a refusal by the sending rules skips a blocked contact and fails the rest. */
      const fromBatch = (result: BatchResult, sentAt?: string): Outcome =>
        result.status === "refused"
          ? result.reason === "contact_blocked"
            ? { id: result.key, status: "skipped", error: "contact_blocked", message_id: null }
            : { id: result.key, status: "failed", error: result.reason, message_id: null }
          : {
            id: result.key,
            status: result.status,
            error: result.status === "failed" ? "provider_error" : null,
            message_id: result.messageId,
            ...(sentAt === undefined ? {} : { sent_at: sentAt })
          }

      const drive = Effect.fn("RunEngine.drive")(function*(companyId: CompanyId, runId: number) {
        const located = yield* sql<{ broadcast_id: number }>`
          SELECT broadcast_id FROM broadcast_runs WHERE company_id = ${companyId} AND id = ${runId}`.pipe(Effect.orDie)
        if (located.length === 0) return
        const broadcastId = Number(located[0].broadcast_id)
        const found = yield* repo.find(companyId, broadcastId)
        if (Option.isNone(found)) return
        const broadcast = found.value
        // Only one driver of a run is live, so a recipient still `sending` belongs to a driver that died.
        // Its message row (written before the provider call, finished after it) settles what it can;
        // the rest are `outcome_unknown`: whether they went out is unknown, and they are never resent on their own.
        yield* sql`
          UPDATE broadcast_recipients r
          SET status = CASE WHEN m.status IN ('sent', 'delivered', 'read') THEN 'sent' ELSE 'failed' END,
            error_message = CASE WHEN m.status IN ('sent', 'delivered', 'read') THEN NULL
              WHEN m.status = 'failed' THEN 'provider_error' ELSE 'outcome_unknown' END,
            message_id = m.id
          FROM broadcast_recipients s
          LEFT JOIN LATERAL (
            SELECT m.id, m.status FROM conversations cv
            JOIN messages m ON m.company_id = ${companyId} AND m.conversation_id = cv.id AND m.direction = 'outbound'
              AND m.metadata ->> 'broadcast_recipient_id' = s.id::text
            WHERE cv.company_id = ${companyId} AND cv.contact_id = s.contact_id
            ORDER BY m.id DESC LIMIT 1
          ) m ON true
          WHERE s.company_id = ${companyId} AND s.run_id = ${runId} AND s.status = 'sending' AND r.id = s.id`.pipe(Effect.orDie)
        if (broadcast.status === "scheduled") yield* repo.setStatus(companyId, broadcastId, "active", yield* nowDate)

        const rate = broadcast.schedule.rateControl
        const pace: Pace = paceOf(rate)
        const window = windowOf(broadcast.schedule.sendWindow)
        const dailyLimit = rate?.enabled !== false ? rate?.dailyLimit ?? null : null
        const recentHours = rate?.enabled !== false ? rate?.skipContactedWithinHours ?? null : null
        const settings = broadcast.content.settings
        const companyTz = yield* repo.companyTimezone(companyId)
        // A broadcast whose creator was deleted sends as the system: no sender user.
        const senderUserId = broadcast.user_id

        const pacers = new Map<number, PacerState>()
        const sizes = new Map<number, number>()
        const fast = new Map<number, number>()
        const runChannels = (yield* sql<{ channel_id: number }>`
          SELECT DISTINCT channel_id FROM broadcast_recipients WHERE run_id = ${runId}`.pipe(Effect.orDie)).map((row) => Number(row.channel_id))
        const idleUntil = new Map<number, number>()
        const actual = new Map<number, Array<number>>()
        const startedAt = yield* Clock.currentTimeMillis
        for (const channelId of broadcast.channel_ids) {
          const recent = yield* sql<{ sent_at: Date }>`
            SELECT sent_at FROM broadcast_recipients
            WHERE broadcast_id = ${broadcastId} AND channel_id = ${channelId} AND sent_at > ${new Date(startedAt - 60_000)}`.pipe(Effect.orDie)
          pacers.set(channelId, newPacer(recent.map((r) => r.sent_at.getTime()), startedAt))
          actual.set(channelId, recent.map((r) => r.sent_at.getTime()).sort((a, b) => a - b))
        }

        const localMinute = (now: Date) =>
          sql`(extract(hour FROM (${now}::timestamptz AT TIME ZONE r.timezone)) * 60 + extract(minute FROM (${now}::timestamptz AT TIME ZONE r.timezone)))::int`
        const inWindow = (minute: Statement.Fragment, w: NonNullable<typeof window>) =>
          w.start <= w.end ? sql`(${minute} >= ${w.start} AND ${minute} < ${w.end})` : sql`(${minute} >= ${w.start} OR ${minute} < ${w.end})`

        /**
         * Per channel, the highest recipient id claimed: claims start after it, because the index entries
         * of the recipients already claimed stay until vacuum and a claim from the start of the run would
         * step over all of them (slower with every batch). A claim that finds fewer than it asked for
         * starts from the beginning next time, which picks up recipients put back to `pending`.
         */
        const cursors = new Map<number, number>()
        const claim = (channelId: number, n: number, now: Date) => {
          const after = cursors.get(channelId) ?? 0
          let eligible = sql`true`
          if (window !== null) {
            const minute = localMinute(now)
            eligible = inWindow(minute, window)
            if (window.smart) {
              // Compared as minutes since the window opened, so that a window over midnight orders them too.
              eligible = sql`${eligible} AND (${minute} - ${window.start} + 1440) % 1440 >= (CASE WHEN r.preferred_minute IS NOT NULL AND ${
                inWindow(sql`r.preferred_minute`, window)
              } THEN r.preferred_minute ELSE ${window.start} END - ${window.start} + 1440) % 1440`
            }
          }
          const recent = recentHours === null ? sql`false` : sql`EXISTS (
            SELECT 1 FROM conversations cv
            JOIN messages o ON o.company_id = ${companyId} AND o.conversation_id = cv.id AND o.direction = 'outbound'
              AND o."timestamp" > ${new Date(now.getTime() - recentHours * 3600_000)}
            WHERE cv.company_id = ${companyId} AND cv.contact_id = cl.contact_id)`
          return sql<Claimed>`
            WITH picked AS (
              SELECT r.id FROM broadcast_recipients r
              WHERE r.run_id = ${runId} AND r.status = 'pending' AND r.channel_id = ${channelId} AND r.id > ${after} AND ${eligible}
              ORDER BY r.id LIMIT ${n} FOR UPDATE SKIP LOCKED
            ), cl AS (
              UPDATE broadcast_recipients r SET status = 'sending', attempts = r.attempts + 1, sent_at = ${now}
              FROM picked WHERE r.id = picked.id
              RETURNING r.id, r.contact_id, r.channel_id, r.contact_account_id, r.variant_key
            )
            SELECT cl.id, cl.contact_id, cl.channel_id, cl.contact_account_id, cl.variant_key,
              c.first_name, c.last_name, c.display_name, c.company_name,
              (c.opted_out_at IS NOT NULL) AS opted_out, (c.blocked_at IS NOT NULL) AS blocked, ${recent} AS recent
            FROM cl JOIN contacts c ON c.id = cl.contact_id AND c.company_id IS NOT DISTINCT FROM ${companyId}::bigint
            ORDER BY cl.id`.pipe(
            Effect.map((rows) => rows.map((row) => ({ ...row, id: Number(row.id), contact_id: Number(row.contact_id), channel_id: Number(row.channel_id), contact_account_id: Number(row.contact_account_id) }))),
            Effect.orDie
          )
        }

        const sentToday = (now: Date) =>
          sql<{ count: number; next_day: Date }>`
            SELECT count(*)::int AS count,
              (date_trunc('day', ${now}::timestamptz AT TIME ZONE ${companyTz}) + interval '1 day') AT TIME ZONE ${companyTz} AS next_day
            FROM broadcast_recipients
            WHERE broadcast_id = ${broadcastId} AND sent_at >= (date_trunc('day', ${now}::timestamptz AT TIME ZONE ${companyTz}) AT TIME ZONE ${companyTz})`.pipe(
            Effect.map((rows) => rows[0]),
            Effect.orDie
          )

        const failed = (id: number, error: string): Outcome => ({ id, status: "failed", error, message_id: null })
        const skipped = (id: number, error: string): Outcome => ({ id, status: "skipped", error, message_id: null })

        const metadataOf = (recipient: Claimed) => ({ broadcast_id: broadcastId, broadcast_run_id: runId, broadcast_recipient_id: recipient.id })

        const textFor = (recipient: Claimed, entry: ChannelContent) => {
          const base = recipient.variant_key !== null
            ? entry.variants?.find((v) => v.key === recipient.variant_key)?.text ?? entry.text ?? ""
            : entry.text ?? ""
          const rendered = withOptOut(render(base, recipient), settings)
          return settings?.trackClicks === true ? trackLinks(rendered, config.appUrl) : { text: rendered, links: [] }
        }

        /** A template recipient's send: the batch's approved template with the recipient's variables. */
        const templateItem = (recipient: Claimed, entry: ChannelContent, template: ApprovedTemplate): BatchItem | Outcome => {
          const variables = Object.fromEntries(Object.entries(entry.variables ?? {}).map(([k, v]) => [k, render(v, recipient)]))
          for (const p of template.parameters) variables[p.name] ??= render(`{{${p.name}}}`, recipient)
          const content = templateContent(template, variables, metadataOf(recipient))
          if (Result.isFailure(content)) return failed(recipient.id, content.failure.reason)
          return { ...content.success, key: recipient.id, contactAccountId: recipient.contact_account_id }
        }

        /** A recipient's outcome without a send (skipped, or failed before it), or its send. */
        const sendFor = (
          recipient: Claimed,
          entry: ChannelContent | undefined,
          template: Result.Result<ApprovedTemplate, TemplateRefusal> | undefined,
          links: Array<{ code: string; company_id: number; recipient_id: number; url: string }>
        ): BatchItem | Outcome => {
          if (recipient.opted_out) return skipped(recipient.id, "opted_out")
          if (recipient.blocked) return skipped(recipient.id, "contact_blocked")
          if (recipient.recent) return skipped(recipient.id, "recently_contacted")
          if (entry === undefined) return failed(recipient.id, "no_content")
          if (template !== undefined) {
            return Result.isFailure(template) ? failed(recipient.id, template.failure.reason) : templateItem(recipient, entry, template.success)
          }
          const text = textFor(recipient, entry)
          for (const l of text.links) links.push({ code: l.code, company_id: companyId, recipient_id: recipient.id, url: l.url })
          return { key: recipient.id, contactAccountId: recipient.contact_account_id, text: text.text, attachments: [], metadata: metadataOf(recipient) }
        }

        /** What each claimed recipient of one channel's batch gets; the channel's template is resolved once for the batch. */
        const prepare = Effect.fnUntraced(function*(channelId: number, claimed: ReadonlyArray<Claimed>) {
          const entry = contentFor(broadcast, channelId)
          const template = entry?.type === "template"
            ? yield* Effect.result(templates.approved(companyId, { templateId: entry.templateId ?? 0, channelId, language: entry.language ?? undefined }))
            : undefined
          const links: Array<{ code: string; company_id: number; recipient_id: number; url: string }> = []
          const prepared = claimed.map((recipient) => ({ recipient, send: sendFor(recipient, entry, template, links) }))
          if (links.length > 0) {
            yield* sql`INSERT INTO broadcast_links (code, company_id, recipient_id, url)
              SELECT code, company_id, recipient_id, url FROM jsonb_to_recordset(${JSON.stringify(links)}::jsonb)
                AS l(code text, company_id bigint, recipient_id bigint, url text)`.pipe(Effect.orDie)
          }
          return yield* withinLimit(channelId, prepared)
        })

        /**
         * Template recipients beyond the channel's messaging limit are skipped. Only templates reserve: the
         * sending rules refuse any other send outside the window before it could count.
         */
        const withinLimit = Effect.fnUntraced(function*(channelId: number, prepared: ReadonlyArray<{ recipient: Claimed; send: BatchItem | Outcome }>) {
          const templated = (send: BatchItem | Outcome): send is BatchItem => !isOutcome(send) && send.template !== undefined
          const accounts = prepared.flatMap(({ recipient, send }) => templated(send) ? [recipient.contact_account_id] : [])
          const beyond = yield* limits.reserve(companyId, channelId, accounts)
          if (beyond.size === 0) return prepared
          return prepared.map((p) => templated(p.send) && beyond.has(p.recipient.contact_account_id) ? { ...p, send: skipped(p.recipient.id, "messaging_limit") } : p)
        })

        /**
         * Sends one claimed batch of one channel; returns how many were claimed. With `slots` (a paced
         * channel) the j-th send starts at the j-th slot, else the batch goes through `Send.many` at once.
         */
        const sendBatch = Effect.fnUntraced(function*(channelId: number, n: number, now: Date, slots: ReadonlyArray<number> | null) {
          const claimed = yield* claim(channelId, n, now)
          if (claimed.length < n) cursors.delete(channelId)
          else cursors.set(channelId, Math.max(cursors.get(channelId) ?? 0, claimed[claimed.length - 1].id))
          if (claimed.length === 0) return 0
          const prepared = yield* prepare(channelId, claimed)
          const outcomes = prepared.flatMap(({ send }) => isOutcome(send) ? [send] : [])
          const items = prepared.flatMap(({ recipient, send }) => isOutcome(send) ? [] : [{ recipient, item: send }])
          if (slots === null) {
            const results = yield* sender.many(companyId, channelId, items.map(({ item }) => item), senderUserId)
            yield* writeOutcomes(companyId, [...outcomes, ...results.map((r) => fromBatch(r))])
            return claimed.length
          }
          yield* writeOutcomes(companyId, outcomes)
          yield* Effect.forEach(items, ({ recipient, item }, j) => pacedSend(channelId, recipient, item, slots[j]), { concurrency: "unbounded", discard: true })
          return claimed.length
        })

        /** A paced send waits for its slot; a pause, cancel or opt-out since the claim still counts. */
        const pacedSend = Effect.fnUntraced(function*(channelId: number, recipient: Claimed, item: BatchItem, slot: number) {
          const wait = slot - (yield* Clock.currentTimeMillis)
          if (wait > 0) yield* Effect.sleep(wait)
          const [fresh] = yield* sql<{ run_status: string; opted_out: boolean }>`
            SELECT (SELECT status FROM broadcast_runs WHERE company_id = ${companyId} AND id = ${runId}) AS run_status,
              (SELECT opted_out_at IS NOT NULL FROM contacts WHERE company_id = ${companyId} AND id = ${recipient.contact_id}) AS opted_out`.pipe(Effect.orDie)
          if (fresh.run_status === "cancelled") return yield* writeOutcomes(companyId, [skipped(recipient.id, "cancelled")])
          if (fresh.run_status !== "processing") return yield* writeOutcomes(companyId, [{ id: recipient.id, status: "pending", error: null, message_id: null }])
          if (fresh.opted_out) return yield* writeOutcomes(companyId, [skipped(recipient.id, "opted_out")])
          const log = actual.get(channelId) ?? []
          actual.set(channelId, log)
          const admitted = admit(log, pace.perMinute, yield* Clock.currentTimeMillis)
          const late = admitted - (yield* Clock.currentTimeMillis)
          if (late > 0) yield* Effect.sleep(late)
          const at = new Date(admitted).toISOString()
          const results = yield* sender.many(companyId, channelId, [item], senderUserId)
          yield* writeOutcomes(companyId, results.map((r) => fromBatch(r, at)))
        })

        let lastProgress = 0
        let countMs = 0
        let progressing = false
        const emitProgress = Effect.gen(function*() {
          const began = yield* Clock.currentTimeMillis
          const counts = yield* repo.runCounts(companyId, runId)
          countMs = (yield* Clock.currentTimeMillis) - began
          yield* events.emit(companyId, "broadcast.run.progress", { broadcast_id: broadcastId, run_id: runId, ...countsPayload(counts) })
        })
        /**
         * At most once a second, and in the background, so that counting never holds up the sends. The
         * count reads every recipient of the run, so on a large run it is spaced to take at most 1/20
         * of one connection.
         */
        const progress = Effect.fnUntraced(function*(force: boolean) {
          const now = yield* Clock.currentTimeMillis
          if (force) {
            lastProgress = now
            return yield* emitProgress
          }
          if (progressing || now - lastProgress < Math.max(progressEveryMs, countMs * 20)) return
          lastProgress = now
          progressing = true
          yield* Effect.forkChild(emitProgress.pipe(Effect.ensuring(Effect.sync(() => (progressing = false)))))
        })

        /** Adapts the channel's batch size to how long a full batch took. */
        const adapt = (channelId: number, took: number) => {
          const size = sizes.get(channelId) ?? firstBatch
          // Two fast batches in a row: a provider ceiling lets its first second's worth through at once.
          const streak = took < batchTargetMs ? (fast.get(channelId) ?? 0) + 1 : 0
          fast.set(channelId, streak >= 2 ? 0 : streak)
          if (streak >= 2) sizes.set(channelId, Math.min(maxBatch, size * 2))
        }
        /** A batch runs to its outcomes: a driver interrupted (its entity moving to another runner) finishes the sends it claimed. */
        const timedBatch = (channelId: number, n: number, now: Date, slots: ReadonlyArray<number> | null) =>
          Effect.gen(function*() {
            const began = yield* Clock.currentTimeMillis
            const count = yield* Effect.uninterruptible(sendBatch(channelId, n, now, slots))
            if (count === 0) idleUntil.set(channelId, began + maxIdleMs)
            else idleUntil.delete(channelId)
            if (slots === null && count === n) adapt(channelId, (yield* Clock.currentTimeMillis) - began)
            return count
          })

        // The lanes of unpaced channels. They stop claiming once `stopping` is set, and tell the main
        // loop when one ends (its channel drained, or it failed), so that a drained run finishes at once.
        let stopping = false
        let failure: Cause.Cause<never> | undefined
        const laneCount = new Map<number, number>()
        const laneFibers = new Set<Fiber.Fiber<void>>()
        const laneEnded = yield* Queue.sliding<void>(1)
        let laneShare = lanesPerRun
        const startLanes = (channelId: number, want: number): Effect.Effect<void> =>
          Effect.gen(function*() {
            for (let k = laneCount.get(channelId) ?? 0; k < want; k++) {
              laneCount.set(channelId, (laneCount.get(channelId) ?? 0) + 1)
              const fiber: Fiber.Fiber<void> = yield* lane(channelId).pipe(
                Effect.catchCause((cause) => Effect.sync(() => {
                  failure ??= cause
                })),
                Effect.ensuring(Effect.suspend(() => {
                  laneCount.set(channelId, (laneCount.get(channelId) ?? 1) - 1)
                  laneFibers.delete(fiber)
                  return Queue.offer(laneEnded, undefined)
                })),
                Effect.forkChild
              )
              laneFibers.add(fiber)
            }
          })
        const lane = (channelId: number): Effect.Effect<void> =>
          Effect.gen(function*() {
            while (!stopping) {
              const size = sizes.get(channelId) ?? firstBatch
              const count = yield* timedBatch(channelId, size, new Date(yield* Clock.currentTimeMillis), null)
              if (count < size || (laneCount.get(channelId) ?? 0) > laneShare) return
              if ((sizes.get(channelId) ?? firstBatch) >= parallelFrom) yield* startLanes(channelId, laneShare)
              yield* progress(false)
            }
          })
        const awaitLanes = Effect.suspend(() => {
          stopping = true
          return Fiber.awaitAll([...laneFibers])
        })
        const stopLanes = Effect.gen(function*() {
          yield* awaitLanes
          if (failure !== undefined) return yield* Effect.failCause(failure)
        })

        const rounds = Effect.gen(function*() {
          while (true) {
            if (failure !== undefined) return yield* stopLanes
            const status = yield* sql<{ status: string }>`SELECT status FROM broadcast_runs WHERE company_id = ${companyId} AND id = ${runId}`.pipe(Effect.orDie)
            if (status[0]?.status !== "processing") return yield* stopLanes
            const nowMs = yield* Clock.currentTimeMillis
            const now = new Date(nowMs)
            // One index probe per selected channel, not a scan of the run's open recipients.
            const open = yield* sql<{ channel_id: number }>`
              SELECT ch AS channel_id FROM unnest(${idArray(runChannels)}::bigint[]) ch
              WHERE EXISTS (SELECT 1 FROM broadcast_recipients WHERE run_id = ${runId} AND status = 'pending' AND channel_id = ch)
                OR EXISTS (SELECT 1 FROM broadcast_recipients WHERE run_id = ${runId} AND status = 'sending' AND channel_id = ch)`.pipe(Effect.orDie)
            if (open.length === 0) {
              yield* stopLanes
              yield* progress(true)
              return yield* finish(companyId, broadcastId, runId)
            }
            let budget = Number.POSITIVE_INFINITY
            let dailyWait = nowMs + maxIdleMs
            if (dailyLimit !== null) {
              const today = yield* sentToday(now)
              budget = Math.max(0, dailyLimit - today.count)
              dailyWait = Math.min(dailyWait, today.next_day.getTime())
            }
            let wakeAt = nowMs + maxIdleMs
            const due: Array<{ channelId: number; n: number; slots: ReadonlyArray<number> | null }> = []
            if (unpaced(pace)) laneShare = Math.max(1, Math.floor(lanesPerRun / open.length))
            for (const row of open) {
              const channelId = Number(row.channel_id)
              const pacer = pacers.get(channelId) ?? newPacer([], nowMs)
              pacers.set(channelId, pacer)
              const slot = Math.max(nextSlot(pace, pacer, nowMs), idleUntil.get(channelId) ?? 0)
              if (slot > nowMs) {
                wakeAt = Math.min(wakeAt, slot)
                continue
              }
              if (budget <= 0) {
                wakeAt = Math.min(wakeAt, dailyWait)
                continue
              }
              if (unpaced(pace) && dailyLimit === null) {
                if ((laneCount.get(channelId) ?? 0) === 0) yield* startLanes(channelId, 1)
                continue
              }
              if (unpaced(pace)) {
                // A daily limit is counted per round, from the database: its sends go in rounds of batches.
                const size = sizes.get(channelId) ?? firstBatch
                for (let k = 0; k < (size >= parallelFrom ? batchesInFlight : 1) && budget > 0; k++) {
                  const n = Math.min(size, budget)
                  budget -= n
                  due.push({ channelId, n, slots: null })
                }
                continue
              }
              const max = Math.min(batchSize, budget)
              const draws = pace.jitterMaxMs > 0 ? yield* Effect.replicateEffect(Random.next, max) : []
              const slots = planSlots(pace, pacer, nowMs, maxIdleMs, max, (i) => draws[i] ?? 0)
              budget -= slots.length
              due.push({ channelId, n: slots.length, slots })
            }
            const claimed = yield* Effect.forEach(due, ({ channelId, n, slots }) => timedBatch(channelId, n, now, slots), { concurrency: "unbounded" })
            yield* progress(false)
            if (claimed.every((c) => c === 0)) {
              const after = yield* Clock.currentTimeMillis
              // Lanes run on their own; a lane that ends wakes the loop to see whether the run is done.
              if (wakeAt > after) yield* Effect.raceFirst(Effect.sleep(Math.min(wakeAt - after, maxIdleMs)), Queue.take(laneEnded))
            }
          }
        })
        // However the drive ends (interrupted too: its entity moving, its job's lease lost), it ends after its
        // lanes' batches: the next drive of the run takes what is still `sending` for a dead driver's.
        return yield* Effect.ensuring(rounds, awaitLanes)
      })

      return RunEngine.of({ start, drive })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide([BroadcastsRepo.layer, TemplateSending.layer, Send.layer, MessagingLimit.layer])
  )
}

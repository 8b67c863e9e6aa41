import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import type { BroadcastStatus, Content, Recurrence, Recipient, Run, RunStatus, Schedule } from "./Domain.ts"
import { idArray } from "../platform/Sql.ts"

export interface BroadcastRow {
  readonly id: number
  readonly company_id: number
  readonly user_id: number | null
  readonly name: string
  readonly status: BroadcastStatus
  readonly segment_id: number | null
  readonly channel_ids: ReadonlyArray<number>
  readonly content: Content
  readonly schedule: Schedule
  readonly recurrence: Recurrence | null
  readonly recurring_paused: boolean
  readonly next_run_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

export interface BroadcastFields {
  readonly name: string
  readonly status: BroadcastStatus
  readonly segmentId: number | null
  readonly channelIds: ReadonlyArray<number>
  readonly content: Content
  readonly schedule: Schedule
  readonly recurrence: Recurrence | null
}

export interface RunRow {
  readonly id: number
  readonly company_id: number
  readonly broadcast_id: number
  readonly status: RunStatus
  readonly total: number
  readonly started_at: Date
  readonly completed_at: Date | null
}

export interface Counts {
  readonly total: number
  readonly pending: number
  readonly sending: number
  readonly sent: number
  readonly delivered: number
  readonly read: number
  readonly failed: number
  readonly skipped: number
  readonly clicked: number
  readonly replied: number
}

interface RecipientRow {
  readonly id: number
  readonly run_id: number
  readonly contact_id: number
  readonly identifier: string
  readonly status: string
  readonly error_message: string | null
  readonly attempts: number
  readonly variant_key: string | null
  readonly sent_at: Date | null
  readonly delivered_at: Date | null
  readonly read_at: Date | null
  readonly replied_at: Date | null
  readonly clicked_at: Date | null
  readonly display_name: string | null
  readonly first_name: string | null
  readonly last_name: string | null
  readonly channel_id: number
  readonly channel_name: string
}

const iso = (d: Date | null) => d === null ? null : d.toISOString()

export const toRun = (row: RunRow, counts: Counts): Run => ({
  id: row.id,
  broadcast_id: row.broadcast_id,
  status: row.status,
  total: row.total,
  sent: counts.sent,
  delivered: counts.delivered,
  read: counts.read,
  failed: counts.failed,
  skipped: counts.skipped,
  pending: counts.pending + counts.sending,
  started_at: row.started_at.toISOString(),
  completed_at: iso(row.completed_at)
})

const toRecipient = (row: RecipientRow): Recipient => ({
  id: row.id,
  run_id: row.run_id,
  contact_id: row.contact_id,
  identifier: row.identifier,
  status: row.status,
  error_message: row.error_message,
  attempts: row.attempts,
  variant_key: row.variant_key,
  sent_at: iso(row.sent_at),
  delivered_at: iso(row.delivered_at),
  read_at: iso(row.read_at),
  replied_at: iso(row.replied_at),
  clicked_at: iso(row.clicked_at),
  contact: { id: row.contact_id, display_name: row.display_name, first_name: row.first_name, last_name: row.last_name },
  channel: { id: row.channel_id, name: row.channel_name }
})

export const emptyCounts: Counts = {
  total: 0,
  pending: 0,
  sending: 0,
  sent: 0,
  delivered: 0,
  read: 0,
  failed: 0,
  skipped: 0,
  clicked: 0,
  replied: 0
}

/** A reply: an inbound message in the recipient's thread within 7 days of the send. */
const repliedAt = (sql: SqlClient.SqlClient) =>
  sql`(SELECT min(i."timestamp") FROM messages i
    WHERE i.company_id = r.company_id AND i.thread_id = m.thread_id AND i.direction = 'inbound'
      AND i."timestamp" > r.sent_at AND i."timestamp" <= r.sent_at + interval '7 days')`

/**
 * Status as the API shows it: a sent recipient takes its message's delivery state, which the
 * provider's status webhooks keep current.
 */
const shownStatus = (sql: SqlClient.SqlClient) =>
  sql`CASE WHEN r.status = 'sent' AND m.status IN ('delivered', 'read') THEN m.status ELSE r.status END`

export interface ScopeFilter {
  readonly broadcastId: number
  readonly runId?: number | undefined
}

export class BroadcastsRepo extends Context.Service<BroadcastsRepo, {
  insert(companyId: CompanyId, userId: number | null, fields: BroadcastFields, now: Date): Effect.Effect<number>
  update(companyId: CompanyId, id: number, fields: BroadcastFields, now: Date): Effect.Effect<void>
  find(companyId: CompanyId, id: number, forUpdate?: boolean): Effect.Effect<Option.Option<BroadcastRow>>
  page(companyId: CompanyId, statuses: ReadonlyArray<string>, limit: number, offset: number): Effect.Effect<{ readonly rows: ReadonlyArray<BroadcastRow>; readonly total: number }>
  softDelete(companyId: CompanyId, id: number, now: Date): Effect.Effect<boolean>
  setStatus(companyId: CompanyId, id: number, status: BroadcastStatus, now: Date): Effect.Effect<void>
  setTimer(companyId: CompanyId, id: number, nextRunAt: Date | null, paused: boolean, now: Date): Effect.Effect<void>
  runsOf(companyId: CompanyId, broadcastIds: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<RunRow>>
  findRun(companyId: CompanyId, broadcastId: number, runId: number, forUpdate?: boolean): Effect.Effect<Option.Option<RunRow>>
  insertRun(companyId: CompanyId, broadcastId: number, now: Date): Effect.Effect<number>
  setRunStatus(companyId: CompanyId, runId: number, status: RunStatus, completedAt: Date | null): Effect.Effect<void>
  setRunTotal(companyId: CompanyId, runId: number): Effect.Effect<number>
  /** Counts per run (`runId` keyed) or per variant (`variant` keyed), over a broadcast. */
  counts(companyId: CompanyId, broadcastIds: ReadonlyArray<number>, by: "run" | "variant" | "broadcast"): Effect.Effect<ReadonlyArray<Counts & { readonly key: string }>>
  /** One run's counts by status (delivered and read from its messages), without clicks and replies: what the engine reports as it goes. */
  runCounts(companyId: CompanyId, runId: number): Effect.Effect<Counts>
  recipients(companyId: CompanyId, broadcastId: number, status: string | null, limit: number, offset: number): Effect.Effect<{ readonly rows: ReadonlyArray<Recipient>; readonly total: number }>
  /** Pending recipients of a run become skipped (cancel). */
  skipPending(companyId: CompanyId, runId: number, reason: string): Effect.Effect<number>
  /** Failed recipients of a run become pending again (retry-failed); their attempts stay counted. */
  retryFailed(companyId: CompanyId, runId: number): Effect.Effect<number>
  activeRuns(companyId: CompanyId, broadcastId: number): Effect.Effect<ReadonlyArray<RunRow>>
  segment(companyId: CompanyId, segmentId: number): Effect.Effect<Option.Option<{ readonly id: number; readonly type: "dynamic" | "static"; readonly group_logic: "and" | "or"; readonly conditions: ReadonlyArray<any> }>>
  segments(companyId: CompanyId): Effect.Effect<ReadonlyArray<{ readonly id: number; readonly name: string }>>
  channels(companyId: CompanyId, ids: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<{ readonly id: number; readonly name: string; readonly type: string; readonly provider: string; readonly settings: Record<string, unknown> }>>
  companyTimezone(companyId: CompanyId): Effect.Effect<string>
  /** Templates with an approved instance, for the builder: one row per group with its approved channels and languages. */
  approvedTemplates(companyId: CompanyId): Effect.Effect<ReadonlyArray<{ readonly id: number; readonly name: string; readonly slug: string; readonly channels: ReadonlyArray<{ readonly channel_id: number; readonly language: string }> }>>
  /** The slug and language a template reference (group id, else instance id) names, for the rule-3 refusal text. */
  templateRef(companyId: CompanyId, templateId: number, language: string | null): Effect.Effect<Option.Option<{ readonly slug: string; readonly language: string }>>
  /** One click on a link: the URL and whether it was the first; None for an unknown code. */
  click(code: string, now: Date): Effect.Effect<Option.Option<string>>
  /** Reachable audience per chosen channel (same rules as the snapshot). */
  reachable(companyId: CompanyId, members: Statement.Statement<{ readonly id: number }>, channelIds: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<{ readonly channel_id: number; readonly count: number }>>
  /** The contact accounts the audience would reach on `channelId` (one of `channelIds`, picked as the snapshot picks). */
  reachableAccounts(companyId: CompanyId, members: Statement.Statement<{ readonly id: number }>, channelIds: ReadonlyArray<number>, channelId: number): Effect.Effect<ReadonlyArray<number>>
}>()("crm/broadcasts/BroadcastsRepo") {
  static readonly layer = Layer.effect(
    BroadcastsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, company_id, user_id, name, status, segment_id, channel_ids, content, schedule, recurrence,
        recurring_paused, next_run_at, created_at, updated_at`
      const runColumns = sql`id, company_id, broadcast_id, status, total, started_at, completed_at`
      const json = (value: unknown) => JSON.stringify(value)

      const insert = (companyId: CompanyId, userId: number | null, f: BroadcastFields, now: Date) =>
        sql<{ id: number }>`
          INSERT INTO broadcasts (company_id, user_id, name, status, segment_id, channel_ids, content, schedule, recurrence, created_at, updated_at)
          VALUES (${companyId}, ${userId}, ${f.name}, ${f.status}, ${f.segmentId}, ${json(f.channelIds)}::jsonb, ${json(f.content)}::jsonb,
            ${json(f.schedule)}::jsonb, ${f.recurrence === null ? null : json(f.recurrence)}::jsonb, ${now}, ${now})
          RETURNING id`.pipe(Effect.map((rows) => Number(rows[0].id)), Effect.orDie)

      const update = (companyId: CompanyId, id: number, f: BroadcastFields, now: Date) =>
        sql`
          UPDATE broadcasts SET name = ${f.name}, status = ${f.status}, segment_id = ${f.segmentId}, channel_ids = ${json(f.channelIds)}::jsonb,
            content = ${json(f.content)}::jsonb, schedule = ${json(f.schedule)}::jsonb,
            recurrence = ${f.recurrence === null ? null : json(f.recurrence)}::jsonb, updated_at = ${now}
          WHERE company_id = ${companyId} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

      const find = (companyId: CompanyId, id: number, forUpdate = false) =>
        sql<BroadcastRow>`
          SELECT ${columns} FROM broadcasts WHERE company_id = ${companyId} AND id = ${id} AND deleted_at IS NULL
          ${forUpdate ? sql`FOR UPDATE` : sql``}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0]).pipe(Option.map(normalize))),
          Effect.orDie
        )

      const normalize = (row: BroadcastRow): BroadcastRow => ({ ...row, id: Number(row.id), company_id: Number(row.company_id), segment_id: row.segment_id === null ? null : Number(row.segment_id) })
      const normalizeRun = (row: RunRow): RunRow => ({ ...row, id: Number(row.id), company_id: Number(row.company_id), broadcast_id: Number(row.broadcast_id) })

      const page = (companyId: CompanyId, statuses: ReadonlyArray<string>, limit: number, offset: number) =>
        Effect.gen(function*() {
          const filter = statuses.length > 0 ? sql`AND status IN ${sql.in(statuses)}` : sql``
          const rows = yield* sql<BroadcastRow>`
            SELECT ${columns} FROM broadcasts WHERE company_id = ${companyId} AND deleted_at IS NULL ${filter}
            ORDER BY id DESC LIMIT ${limit} OFFSET ${offset}`
          const [{ total }] = yield* sql<{ total: number }>`
            SELECT count(*)::int AS total FROM broadcasts WHERE company_id = ${companyId} AND deleted_at IS NULL ${filter}`
          return { rows: rows.map(normalize), total }
        }).pipe(Effect.orDie)

      const softDelete = (companyId: CompanyId, id: number, now: Date) =>
        sql`UPDATE broadcasts SET deleted_at = ${now}, next_run_at = NULL WHERE company_id = ${companyId} AND id = ${id} AND deleted_at IS NULL RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const setStatus = (companyId: CompanyId, id: number, status: BroadcastStatus, now: Date) =>
        sql`UPDATE broadcasts SET status = ${status}, updated_at = ${now} WHERE company_id = ${companyId} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

      const setTimer = (companyId: CompanyId, id: number, nextRunAt: Date | null, paused: boolean, now: Date) =>
        sql`UPDATE broadcasts SET next_run_at = ${nextRunAt}, recurring_paused = ${paused}, updated_at = ${now}
          WHERE company_id = ${companyId} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

      const runsOf = (companyId: CompanyId, ids: ReadonlyArray<number>) =>
        ids.length === 0 ? Effect.succeed([]) : sql<RunRow>`
          SELECT ${runColumns} FROM broadcast_runs WHERE company_id = ${companyId} AND broadcast_id IN ${sql.in(ids)}
          ORDER BY id DESC`.pipe(Effect.map((rows) => rows.map(normalizeRun)), Effect.orDie)

      const findRun = (companyId: CompanyId, broadcastId: number, runId: number, forUpdate = false) =>
        sql<RunRow>`
          SELECT ${runColumns} FROM broadcast_runs WHERE company_id = ${companyId} AND broadcast_id = ${broadcastId} AND id = ${runId}
          ${forUpdate ? sql`FOR UPDATE` : sql``}`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0]).pipe(Option.map(normalizeRun))), Effect.orDie)

      const insertRun = (companyId: CompanyId, broadcastId: number, now: Date) =>
        sql<{ id: number }>`
          INSERT INTO broadcast_runs (company_id, broadcast_id, status, started_at)
          VALUES (${companyId}, ${broadcastId}, 'processing', ${now}) RETURNING id`.pipe(Effect.map((rows) => Number(rows[0].id)), Effect.orDie)

      const setRunStatus = (companyId: CompanyId, runId: number, status: RunStatus, completedAt: Date | null) =>
        sql`UPDATE broadcast_runs SET status = ${status}, completed_at = ${completedAt} WHERE company_id = ${companyId} AND id = ${runId}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const setRunTotal = (companyId: CompanyId, runId: number) =>
        sql<{ total: number }>`
          UPDATE broadcast_runs SET total = (SELECT count(*) FROM broadcast_recipients WHERE run_id = ${runId})
          WHERE company_id = ${companyId} AND id = ${runId} RETURNING total`.pipe(Effect.map((rows) => rows[0]?.total ?? 0), Effect.orDie)


      /** The recipients' counts by status (over `broadcast_recipients r` joined to its `messages m`). */
      const statusCounts = sql`count(*)::int AS total,
        count(*) FILTER (WHERE r.status = 'pending')::int AS pending,
        count(*) FILTER (WHERE r.status = 'sending')::int AS sending,
        count(*) FILTER (WHERE r.status = 'sent')::int AS sent,
        count(*) FILTER (WHERE r.status = 'sent' AND m.status IN ('delivered', 'read'))::int AS delivered,
        count(*) FILTER (WHERE r.status = 'sent' AND m.status = 'read')::int AS read,
        count(*) FILTER (WHERE r.status = 'failed')::int AS failed,
        count(*) FILTER (WHERE r.status = 'skipped')::int AS skipped`
      const counts = (companyId: CompanyId, ids: ReadonlyArray<number>, by: "run" | "variant" | "broadcast") =>
        ids.length === 0 ? Effect.succeed([]) : Effect.gen(function*() {
          const key = by === "run" ? sql`r.run_id::text` : by === "variant" ? sql`coalesce(r.variant_key, '')` : sql`r.broadcast_id::text`
          const rows = yield* sql<Counts & { key: string }>`
            SELECT ${key} AS key,
              ${statusCounts},
              count(*) FILTER (WHERE EXISTS (SELECT 1 FROM broadcast_links l WHERE l.recipient_id = r.id AND l.clicked_at IS NOT NULL))::int AS clicked,
              count(*) FILTER (WHERE r.status = 'sent' AND ${repliedAt(sql)} IS NOT NULL)::int AS replied
            FROM broadcast_recipients r
            LEFT JOIN messages m ON m.id = r.message_id AND m.company_id = r.company_id
            WHERE r.company_id = ${companyId} AND r.broadcast_id IN ${sql.in(ids)}
            GROUP BY 1`
          return rows
        }).pipe(Effect.orDie)

      const runCounts = (companyId: CompanyId, runId: number) =>
        sql<Counts>`
          SELECT ${statusCounts},
            0 AS clicked, 0 AS replied
          FROM broadcast_recipients r
          LEFT JOIN messages m ON m.id = r.message_id AND m.company_id = r.company_id AND r.status = 'sent'
          WHERE r.company_id = ${companyId} AND r.run_id = ${runId}`.pipe(Effect.map((rows) => rows[0]), Effect.orDie)

      const recipients = (companyId: CompanyId, broadcastId: number, status: string | null, limit: number, offset: number) =>
        Effect.gen(function*() {
          const filter = status === null ? sql`` : sql`AND ${shownStatus(sql)} = ${status}`
          const from = sql`FROM broadcast_recipients r
            LEFT JOIN messages m ON m.id = r.message_id AND m.company_id = r.company_id
            WHERE r.company_id = ${companyId} AND r.broadcast_id = ${broadcastId} ${filter}`
          const rows = yield* sql<RecipientRow>`
            SELECT r.id, r.run_id, r.contact_id, r.identifier, ${shownStatus(sql)} AS status, r.error_message, r.attempts, r.variant_key, r.sent_at,
              (SELECT min(s.created_at) FROM message_statuses s WHERE s.message_id = m.id AND s.status IN ('delivered', 'read')) AS delivered_at,
              (SELECT min(s.created_at) FROM message_statuses s WHERE s.message_id = m.id AND s.status = 'read') AS read_at,
              CASE WHEN r.status = 'sent' THEN ${repliedAt(sql)} END AS replied_at,
              (SELECT min(l.clicked_at) FROM broadcast_links l WHERE l.recipient_id = r.id) AS clicked_at,
              c.display_name, c.first_name, c.last_name, r.channel_id, ch.name AS channel_name
            FROM (SELECT r.*, m.id AS mid ${from} ORDER BY r.id LIMIT ${limit} OFFSET ${offset}) r
            LEFT JOIN messages m ON m.id = r.mid AND m.company_id = r.company_id
            JOIN contacts c ON c.id = r.contact_id AND c.company_id = r.company_id
            JOIN channels ch ON ch.id = r.channel_id AND ch.company_id = r.company_id
            ORDER BY r.id`
          const [{ total }] = yield* sql<{ total: number }>`SELECT count(*)::int AS total ${from}`
          return { rows: rows.map((row) => toRecipient({ ...row, id: Number(row.id), run_id: Number(row.run_id), contact_id: Number(row.contact_id), channel_id: Number(row.channel_id) })), total }
        }).pipe(Effect.orDie)

      const skipPending = (companyId: CompanyId, runId: number, reason: string) =>
        sql`UPDATE broadcast_recipients SET status = 'skipped', error_message = ${reason}
          WHERE company_id = ${companyId} AND run_id = ${runId} AND status = 'pending' RETURNING id`.pipe(Effect.map((rows) => rows.length), Effect.orDie)

      const retryFailed = (companyId: CompanyId, runId: number) =>
        sql`UPDATE broadcast_recipients SET status = 'pending', error_message = NULL
          WHERE company_id = ${companyId} AND run_id = ${runId} AND status = 'failed' RETURNING id`.pipe(Effect.map((rows) => rows.length), Effect.orDie)

      const activeRuns = (companyId: CompanyId, broadcastId: number) =>
        sql<RunRow>`SELECT ${runColumns} FROM broadcast_runs
          WHERE company_id = ${companyId} AND broadcast_id = ${broadcastId} AND status IN ('processing', 'paused')`.pipe(
          Effect.map((rows) => rows.map(normalizeRun)),
          Effect.orDie
        )

      const segment = (companyId: CompanyId, segmentId: number) =>
        sql<{ id: number; type: "dynamic" | "static"; group_logic: "and" | "or"; conditions: ReadonlyArray<any> }>`
          SELECT id, type, group_logic, conditions FROM segments WHERE company_id = ${companyId} AND id = ${segmentId}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0]).pipe(Option.map((row) => ({ ...row, id: Number(row.id) })))),
          Effect.orDie
        )

      const segments = (companyId: CompanyId) =>
        sql<{ id: number; name: string }>`SELECT id, name FROM segments WHERE company_id = ${companyId} ORDER BY name, id LIMIT 500`.pipe(
          Effect.map((rows) => rows.map((row) => ({ id: Number(row.id), name: row.name }))),
          Effect.orDie
        )

      const channels = (companyId: CompanyId, ids: ReadonlyArray<number>) =>
        ids.length === 0 ? Effect.succeed([]) : sql<{ id: number; name: string; type: string; provider: string; settings: Record<string, unknown> }>`
          SELECT id, name, type, provider, settings FROM channels
          WHERE company_id = ${companyId} AND id IN ${sql.in(ids)} AND deleted_at IS NULL`.pipe(
          Effect.map((rows) => rows.map((row) => ({ ...row, id: Number(row.id) }))),
          Effect.orDie
        )

      const companyTimezone = (companyId: CompanyId) =>
        sql<{ timezone: string }>`SELECT timezone FROM companies WHERE id = ${companyId}`.pipe(
          Effect.map((rows) => rows[0]?.timezone ?? "UTC"),
          Effect.orDie
        )

      const templateRef = (companyId: CompanyId, templateId: number, language: string | null) =>
        sql<{ slug: string; language: string }>`
          SELECT g.slug, coalesce(${language}::text, i.language, (SELECT t.language FROM templates t WHERE t.company_id = ${companyId} AND t.group_id = g.id ORDER BY t.id LIMIT 1), 'en') AS language
          FROM template_groups g
          LEFT JOIN templates i ON i.company_id = ${companyId} AND i.id = ${templateId} AND i.group_id = g.id
          WHERE g.company_id = ${companyId}
            AND (g.id = ${templateId} OR g.id = (SELECT group_id FROM templates WHERE company_id = ${companyId} AND id = ${templateId}))
          ORDER BY (g.id = ${templateId}) DESC LIMIT 1`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])), Effect.orDie)

      const approvedTemplates = (companyId: CompanyId) =>
        sql<{ id: number; name: string; slug: string; channels: ReadonlyArray<{ channel_id: number; language: string }> }>`
          SELECT g.id, g.name, g.slug, jsonb_agg(jsonb_build_object('channel_id', t.channel_id, 'language', t.language) ORDER BY t.id) AS channels
          FROM template_groups g
          JOIN templates t ON t.company_id = ${companyId} AND t.group_id = g.id AND t.meta_status = 'approved' AND t.channel_id IS NOT NULL
          WHERE g.company_id = ${companyId} AND g.status <> 'archived'
          GROUP BY g.id ORDER BY g.name, g.id LIMIT 500`.pipe(Effect.map((rows) => rows.map((row) => ({ ...row, id: Number(row.id) }))), Effect.orDie)

      const click = (code: string, now: Date) =>
        sql<{ url: string }>`
          UPDATE broadcast_links SET clicks = clicks + 1, clicked_at = coalesce(clicked_at, ${now})
          WHERE code = ${code} RETURNING url`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0]?.url)), Effect.orDie)

      const reachable = (companyId: CompanyId, members: Statement.Statement<{ readonly id: number }>, channelIds: ReadonlyArray<number>) =>
        sql<{ channel_id: number; count: number }>`
          SELECT pick.channel_id, count(*)::int AS count
          FROM (${members}) mem
          JOIN contacts c ON c.id = mem.id AND c.company_id = ${companyId}
          CROSS JOIN LATERAL (${pickChannel(sql, companyId, channelIds)}) pick
          WHERE c.opted_out_at IS NULL AND c.blocked_at IS NULL
          GROUP BY pick.channel_id`.pipe(Effect.orDie)

      const reachableAccounts = (companyId: CompanyId, members: Statement.Statement<{ readonly id: number }>, channelIds: ReadonlyArray<number>, channelId: number) =>
        sql<{ account_id: number }>`
          SELECT pick.account_id
          FROM (${members}) mem
          JOIN contacts c ON c.id = mem.id AND c.company_id = ${companyId}
          CROSS JOIN LATERAL (${pickChannel(sql, companyId, channelIds)}) pick
          WHERE c.opted_out_at IS NULL AND c.blocked_at IS NULL AND pick.channel_id = ${channelId}`.pipe(
          Effect.map((rows) => rows.map((row) => Number(row.account_id))),
          Effect.orDie
        )

      return BroadcastsRepo.of({
        insert,
        update,
        find,
        runCounts,
        page,
        softDelete,
        setStatus,
        setTimer,
        runsOf,
        findRun,
        insertRun,
        setRunStatus,
        setRunTotal,
        counts,
        recipients,
        skipPending,
        retryFailed,
        activeRuns,
        segment,
        segments,
        channels,
        companyTimezone,
        templateRef,
        approvedTemplates,
        click,
        reachable,
        reachableAccounts
      })
    })
  )
}

/**
 * The recipient's channel: the first selected channel, in the given order, on which contact `c`
 * has an account of that channel's type (the lateral subquery of the snapshot and the estimate).
 */
export const pickChannel = (sql: SqlClient.SqlClient, companyId: CompanyId, channelIds: ReadonlyArray<number>) =>
  sql`SELECT ch.id AS channel_id, ca.id AS account_id, ca.external_id
    FROM unnest(${idArray(channelIds)}::bigint[]) WITH ORDINALITY AS sel(id, ord)
    JOIN channels ch ON ch.id = sel.id AND ch.company_id = ${companyId} AND ch.deleted_at IS NULL
    JOIN contact_accounts ca ON ca.company_id = ${companyId} AND ca.contact_id = c.id AND ca.channel_type = ch.type
    ORDER BY sel.ord, ca.id LIMIT 1`

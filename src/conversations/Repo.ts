import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { VisibleChannels } from "../auth/ChannelAccess.ts"
import type { CompanyId } from "../auth/Domain.ts"
import { idArray, likeEscape } from "../platform/Sql.ts"
import type { Conversation, ListFilters, Priority, Status, Thread } from "./Domain.ts"

interface ConversationRow {
  readonly id: number
  readonly contact_id: number
  readonly first_name: string | null
  readonly last_name: string | null
  readonly display_name: string | null
  readonly contact_status: string
  readonly blocked_at: Date | null
  readonly opted_out_at: Date | null
  readonly status: Status
  readonly snoozed_until: Date | null
  readonly priority: Priority | null
  readonly assignee_id: number | null
  readonly assignee_name: string | null
  readonly team_id: number | null
  readonly team_name: string | null
  readonly last_message_id: number | null
  readonly last_message_direction: string | null
  readonly last_message_type: string | null
  readonly last_message_preview: string | null
  readonly last_message_timestamp: Date | null
  readonly unread_count: number
  readonly waiting_since: Date | null
  readonly first_reply_at: Date | null
  readonly last_message_at: Date | null
  /** Microseconds since the epoch, as text: the exact position of the row for a cursor. */
  readonly activity_us: string | null
  readonly created_at: Date
  readonly updated_at: Date
}

interface ThreadRow {
  readonly id: number
  readonly conversation_id: number
  readonly channel_id: number
  readonly channel_type: string
  readonly contact_account_id: number | null
  readonly external_thread_id: string | null
  readonly is_group: boolean
  readonly last_inbound_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

/** Where a listed page ends: the last row's activity (microseconds, null when it has none) and id. */
export interface Position {
  readonly activityUs: string | null
  readonly id: number
}

export interface ListPlan {
  readonly userId: number
  /** The live channels the caller sees; a conversation is listed when one of its threads is on one. */
  readonly channelIds: ReadonlyArray<number>
  readonly filters: ListFilters
  readonly after: Option.Option<Position>
  readonly offset: number
  readonly limit: number
}

/** The row as it was before a change, for the events that announce it. */
export interface Before {
  readonly contact_id: number
  readonly status: Status
  readonly assigned_user_id: number | null
  readonly assigned_team_id: number | null
  readonly priority: Priority | null
}

interface Counts {
  readonly mine: number
  readonly unassigned: number
  readonly all: number
  readonly total: number
}

export interface Reopened {
  readonly id: number
  readonly company_id: number
  readonly contact_id: number
  readonly snoozed_until: Date
}

const iso = (d: Date | null) => (d === null ? null : d.toISOString())

const view = (row: ConversationRow): Conversation => ({
  id: row.id,
  contact_id: row.contact_id,
  contact: {
    id: row.contact_id,
    firstName: row.first_name,
    lastName: row.last_name,
    displayName: row.display_name,
    status: row.contact_status,
    blocked_at: iso(row.blocked_at),
    opted_out_at: iso(row.opted_out_at)
  },
  status: row.status,
  snoozed_until: iso(row.snoozed_until),
  priority: row.priority,
  assignee: row.assignee_id === null ? null : { id: row.assignee_id, name: row.assignee_name ?? "" },
  team: row.team_id === null ? null : { id: row.team_id, name: row.team_name ?? "" },
  last_message: row.last_message_id === null ? null : {
    id: row.last_message_id,
    direction: row.last_message_direction ?? "inbound",
    type: row.last_message_type ?? "text",
    preview: row.last_message_preview,
    timestamp: (row.last_message_timestamp ?? row.created_at).toISOString()
  },
  unread_count: Math.max(0, row.unread_count),
  waiting_since: iso(row.waiting_since),
  first_reply_at: iso(row.first_reply_at),
  last_message_at: iso(row.last_message_at),
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString()
})

const threadView = (row: ThreadRow): Thread => ({
  ...row,
  last_inbound_at: iso(row.last_inbound_at),
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString()
})

const positionOf = (row: ConversationRow): Position => ({ activityUs: row.activity_us, id: row.id })

export class ConversationsRepo extends Context.Service<ConversationsRepo, {
  /** The live channels among those visible (every live channel of the company for `all`). */
  liveChannels(companyId: CompanyId, visible: VisibleChannels): Effect.Effect<ReadonlyArray<number>>
  list(companyId: CompanyId, plan: ListPlan): Effect.Effect<{
    readonly items: ReadonlyArray<Conversation>
    readonly next: Option.Option<Position>
  }>
  /** Counts under the filters other than the assignee (`mine`, `unassigned`, `all`) and under all of them (`total`). */
  counts(companyId: CompanyId, plan: ListPlan): Effect.Effect<Counts>
  find(companyId: CompanyId, userId: number, channelIds: ReadonlyArray<number>, id: number): Effect.Effect<Option.Option<Conversation>>
  threads(companyId: CompanyId, visible: VisibleChannels, conversationId: number): Effect.Effect<ReadonlyArray<Thread>>
  /** Locks the conversation for a change, when it is visible. */
  lock(companyId: CompanyId, channelIds: ReadonlyArray<number>, id: number): Effect.Effect<Option.Option<Before & { channel_ids: ReadonlyArray<number> }>>
  /** A member of the company who sees one of `channelIds` (admins and managers see all; agents through their teams). */
  memberSeeing(companyId: CompanyId, userId: number, channelIds: ReadonlyArray<number>): Effect.Effect<Option.Option<{ readonly seesChannel: boolean }>>
  teamExists(companyId: CompanyId, teamId: number): Effect.Effect<boolean>
  assign(companyId: CompanyId, id: number, userId: number | null, teamId: number | null, now: Date): Effect.Effect<void>
  setStatus(companyId: CompanyId, id: number, status: Status, snoozedUntil: Date | null, now: Date): Effect.Effect<void>
  setPriority(companyId: CompanyId, id: number, priority: Priority | null, now: Date): Effect.Effect<void>
  /** None when the message is not one of the conversation's. */
  markRead(companyId: CompanyId, id: number, userId: number, messageId: number | null): Effect.Effect<Option.Option<number>>
  /** Folds at most `limit` count deltas (the oldest) into the count groups; answers how many it folded. */
  foldCounts(limit: number): Effect.Effect<number>
  /** Reopens snoozed conversations whose time has come (at most `limit`), oldest first. */
  reopenDue(now: Date, limit: number): Effect.Effect<ReadonlyArray<Reopened>>
}>()("crm/conversations/ConversationsRepo") {
  static readonly layer = Layer.effect(
    ConversationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = (userId: number) => sql`
        cv.id, cv.contact_id, ct.first_name, ct.last_name, ct.display_name, ct.status AS contact_status, ct.blocked_at, ct.opted_out_at,
        cv.status, cv.snoozed_until, cv.priority, cv.assigned_user_id AS assignee_id,
        CASE WHEN u.id IS NULL THEN NULL ELSE trim(concat_ws(' ', u.name, u.lastname)) END AS assignee_name,
        cv.assigned_team_id AS team_id, tm.name AS team_name,
        cv.last_message_id, cv.last_message_direction, cv.last_message_type, cv.last_message_preview, cv.last_message_timestamp,
        cv.inbound_count - COALESCE((SELECT r.read_inbound_count FROM conversation_reads r
          WHERE r.conversation_id = cv.id AND r.user_id = ${userId}), 0) AS unread_count,
        cv.waiting_since, cv.first_reply_at, cv.last_message_at,
        (extract(epoch FROM cv.last_message_at) * 1000000)::bigint::text AS activity_us,
        cv.created_at, cv.updated_at`
      const joins = sql`
        JOIN contacts ct ON ct.id = cv.contact_id
        LEFT JOIN users u ON u.id = cv.assigned_user_id
        LEFT JOIN teams tm ON tm.id = cv.assigned_team_id`
      const seen = (channelIds: ReadonlyArray<number>) => sql`cv.channel_ids && ${idArray(channelIds)}::bigint[]`

      // Unread for the caller: an inbound message they have not read up to (the read mark's `caught_up`,
      // the same truth the counts' deltas follow).
      // A per-row lookup on purpose: an anti-join would read every read mark of the caller before the
      // first row of a page, where walking the list's order finds a page after a few dozen rows.
      const unreadOf = (userId: number) =>
        sql`cv.inbound_count > 0 AND (SELECT r.caught_up FROM conversation_reads r
          WHERE r.conversation_id = cv.id AND r.user_id = ${userId}) IS NOT TRUE`

      const unreadOnly = (plan: ListPlan) => plan.filters.unread === "true" || plan.filters.unread === "1"
      const searchOf = (plan: ListPlan) => plan.filters.q?.trim().toLowerCase() ?? ""

      // The filters a conversation's count group answers: every one but the assignee (which the counts
      // split by), unread and the contact search. Names are those of conversations and of the count tables.
      const grouped = (companyId: CompanyId, plan: ListPlan): Array<Statement.Fragment> => {
        const f = plan.filters
        // A channel filter narrows the visible channels to that one (none if the caller does not see it).
        const channels = f.channel_id === undefined ? plan.channelIds : plan.channelIds.filter((id) => id === f.channel_id)
        const where: Array<Statement.Fragment> = [sql`cv.company_id = ${companyId}`, seen(channels)]
        if (f.status !== undefined && f.status !== "all") where.push(sql`cv.status = ${f.status}`)
        if (f.team_id !== undefined) where.push(sql`cv.assigned_team_id = ${f.team_id}`)
        if (f.priority === "none") where.push(sql`cv.priority IS NULL`)
        else if (f.priority !== undefined) where.push(sql`cv.priority = ${f.priority}`)
        return where
      }

      // Every filter but the assignee.
      const shared = (companyId: CompanyId, plan: ListPlan): ReadonlyArray<Statement.Fragment> => {
        const where = grouped(companyId, plan)
        if (unreadOnly(plan)) where.push(unreadOf(plan.userId))
        const search = searchOf(plan)
        if (search !== "") {
          // The matching contacts first (their trigram index), then their conversations by contact.
          where.push(sql`cv.contact_id = ANY (ARRAY(SELECT s.id FROM contacts s WHERE s.company_id = ${companyId} AND s.deleted_at IS NULL
            AND s.search_text LIKE ${`%${likeEscape(search)}%`}))`)
        }
        return where
      }

      const assigneeClause = (plan: ListPlan): Statement.Fragment => {
        const a = plan.filters.assignee
        if (a === undefined) return sql`true`
        if (a === "me") return sql`cv.assigned_user_id = ${plan.userId}`
        if (a === "unassigned") return sql`cv.assigned_user_id IS NULL`
        if (a === "assigned") return sql`cv.assigned_user_id IS NOT NULL`
        return sql`cv.assigned_user_id = ${Number(a)}`
      }

      const afterClause = (after: Option.Option<Position>): Statement.Fragment => {
        if (Option.isNone(after)) return sql`true`
        const { activityUs, id } = after.value
        if (activityUs === null) return sql`(cv.last_message_at IS NULL AND cv.id < ${id})`
        const at = sql`('epoch'::timestamptz + ${activityUs}::bigint * interval '1 microsecond')`
        return sql`((cv.last_message_at, cv.id) < (${at}, ${id}::bigint) OR cv.last_message_at IS NULL)`
      }

      const liveChannels = (companyId: CompanyId, visible: VisibleChannels) =>
        sql<{ id: number }>`
          SELECT id FROM channels WHERE company_id = ${companyId} AND deleted_at IS NULL
          ${visible === "all" ? sql`` : sql`AND id = ANY (${idArray([...visible])}::bigint[])`}`.pipe(
          Effect.map((rows) => rows.map((row) => row.id)),
          Effect.orDie
        )

      const list = (companyId: CompanyId, plan: ListPlan) =>
        sql<ConversationRow>`
          SELECT ${columns(plan.userId)} FROM conversations cv ${joins}
          WHERE ${sql.and([...shared(companyId, plan), assigneeClause(plan), afterClause(plan.after)])}
          ORDER BY cv.last_message_at DESC NULLS LAST, cv.id DESC
          LIMIT ${plan.limit + 1} OFFSET ${plan.offset}`.pipe(
          Effect.map((rows) => {
            const page = rows.slice(0, plan.limit)
            const next = rows.length > plan.limit ? Option.some(positionOf(page[page.length - 1])) : Option.none()
            return { items: page.map(view), next }
          }),
          Effect.orDie
        )

      const countColumns = (plan: ListPlan, n: Statement.Fragment) => sql`
        COALESCE(sum(${n}) FILTER (WHERE cv.assigned_user_id = ${plan.userId}), 0)::int AS mine,
        COALESCE(sum(${n}) FILTER (WHERE cv.assigned_user_id IS NULL), 0)::int AS unassigned,
        COALESCE(sum(${n}), 0)::int AS all,
        COALESCE(sum(${n}) FILTER (WHERE ${assigneeClause(plan)}), 0)::int AS total`

      // A contact search counts its matches (as few as the search finds); every other mix sums count groups.
      const exactCounts = (companyId: CompanyId, plan: ListPlan) =>
        sql<Counts>`SELECT ${countColumns(plan, sql`1`)} FROM conversations cv WHERE ${sql.and(shared(companyId, plan))}`

      // Unread only: the company's conversations with an inbound message minus those the caller has read up to it.
      const groupCounts = (companyId: CompanyId, plan: ListPlan) => {
        const unread = unreadOnly(plan)
        const readers = idArray(unread ? [0, plan.userId] : [0])
        const from = (table: string) => sql`
          SELECT company_id, reader_id, status, priority, assigned_user_id, assigned_team_id, channel_ids, has_inbound, n
          FROM ${sql(table)} WHERE company_id = ${companyId} AND reader_id = ANY (${readers}::bigint[])`
        const where = grouped(companyId, plan)
        if (unread) where.push(sql`cv.has_inbound`)
        return sql<Counts>`
          SELECT ${countColumns(plan, sql`CASE WHEN cv.reader_id = 0 THEN cv.n ELSE -cv.n END`)}
          FROM (${from("conversation_counts")} UNION ALL ${from("conversation_count_deltas")}) cv
          WHERE ${sql.and(where)}`
      }

      const counts = (companyId: CompanyId, plan: ListPlan) =>
        (searchOf(plan) === "" ? groupCounts(companyId, plan) : exactCounts(companyId, plan)).pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const find = (companyId: CompanyId, userId: number, channelIds: ReadonlyArray<number>, id: number) =>
        sql<ConversationRow>`
          SELECT ${columns(userId)} FROM conversations cv ${joins}
          WHERE cv.company_id = ${companyId} AND cv.id = ${id} AND ${seen(channelIds)}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), view)),
          Effect.orDie
        )

      const channelClause = (visible: VisibleChannels): Statement.Fragment =>
        visible === "all" ? sql`true` : sql`t.channel_id = ANY (${idArray([...visible])}::bigint[])`

      const threads = (companyId: CompanyId, visible: VisibleChannels, conversationId: number) =>
        sql<ThreadRow>`
          SELECT t.id, t.conversation_id, t.channel_id, ch.type AS channel_type, t.contact_account_id, t.external_thread_id,
                 t.is_group, t.last_inbound_at, t.created_at, t.updated_at
          FROM threads t JOIN channels ch ON ch.id = t.channel_id AND ch.deleted_at IS NULL
          WHERE t.company_id = ${companyId} AND t.conversation_id = ${conversationId} AND ${channelClause(visible)}
          ORDER BY t.id`.pipe(Effect.map((rows) => rows.map(threadView)), Effect.orDie)

      const lock = (companyId: CompanyId, channelIds: ReadonlyArray<number>, id: number) =>
        sql<Before & { channel_ids: ReadonlyArray<number> }>`
          SELECT cv.contact_id, cv.status, cv.assigned_user_id, cv.assigned_team_id, cv.priority, cv.channel_ids
          FROM conversations cv WHERE cv.company_id = ${companyId} AND cv.id = ${id} AND ${seen(channelIds)}
          FOR NO KEY UPDATE`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => ({ ...row, channel_ids: row.channel_ids.map(Number) }))),
          Effect.orDie
        )

      const memberSeeing = (companyId: CompanyId, userId: number, channelIds: ReadonlyArray<number>) =>
        sql<{ sees: boolean }>`
          SELECT m.role <> 'agent' OR EXISTS (
            SELECT 1 FROM team_members tmb JOIN teams t ON t.id = tmb.team_id AND t.company_id = ${companyId}
            LEFT JOIN team_channels tc ON tc.team_id = t.id AND tc.company_id = ${companyId}
            WHERE tmb.company_id = ${companyId} AND tmb.user_id = m.user_id
              AND (t.channel_access_mode <> 'custom' OR tc.channel_id = ANY (${idArray(channelIds)}::bigint[]))
          ) AS sees
          FROM memberships m WHERE m.company_id = ${companyId} AND m.user_id = ${userId}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => ({ seesChannel: row.sees }))),
          Effect.orDie
        )

      const teamExists = (companyId: CompanyId, teamId: number) =>
        sql`SELECT 1 FROM teams WHERE company_id = ${companyId} AND id = ${teamId}`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)

      const assign = (companyId: CompanyId, id: number, userId: number | null, teamId: number | null, now: Date) =>
        sql`
          UPDATE conversations SET assigned_user_id = ${userId}, assigned_team_id = ${teamId}, updated_at = ${now}
          WHERE company_id = ${companyId} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

      const setStatus = (companyId: CompanyId, id: number, status: Status, snoozedUntil: Date | null, now: Date) =>
        sql`
          UPDATE conversations SET status = ${status}, snoozed_until = ${snoozedUntil}, updated_at = ${now}
          WHERE company_id = ${companyId} AND id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

      const setPriority = (companyId: CompanyId, id: number, priority: Priority | null, now: Date) =>
        sql`UPDATE conversations SET priority = ${priority}, updated_at = ${now} WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      // The inbound messages up to the read one are counted once here, so that listing never counts
      // messages. The share lock orders the mark with inbound messages of the conversation (their
      // trigger updates the row): the mark then counts every inbound message committed before it, and
      // one arriving after it finds the mark and clears `caught_up`.
      const markRead = (companyId: CompanyId, id: number, userId: number, messageId: number | null) =>
        Effect.gen(function*() {
          yield* sql`SELECT 1 FROM conversations WHERE company_id = ${companyId} AND id = ${id} FOR SHARE`
          const rows = yield* sql<{ message_id: number }>`
            WITH target AS (
              SELECT m.id FROM messages m
              WHERE m.company_id = ${companyId} AND m.conversation_id = ${id}
                AND ${messageId === null ? sql`m.id = (SELECT last_message_id FROM conversations WHERE company_id = ${companyId} AND id = ${id})` : sql`m.id = ${messageId}`}
            ), counted AS (
              SELECT target.id, (SELECT count(*) FROM messages m WHERE m.company_id = ${companyId} AND m.conversation_id = ${id}
                AND m.direction = 'inbound' AND m.id <= target.id)::int AS inbound FROM target
            ), saved AS (
              INSERT INTO conversation_reads (company_id, conversation_id, user_id, last_read_message_id, read_inbound_count, caught_up)
              SELECT ${companyId}, ${id}, ${userId}, counted.id, counted.inbound, counted.inbound >= cv.inbound_count
              FROM counted JOIN conversations cv ON cv.company_id = ${companyId} AND cv.id = ${id}
              ON CONFLICT (conversation_id, user_id) DO UPDATE SET
                last_read_message_id = excluded.last_read_message_id, read_inbound_count = excluded.read_inbound_count,
                caught_up = excluded.caught_up, updated_at = now()
              WHERE conversation_reads.last_read_message_id < excluded.last_read_message_id
            )
            SELECT id AS message_id FROM counted`
          return Option.map(Option.fromNullishOr(rows[0]), (row) => row.message_id)
        }).pipe(sql.withTransaction, Effect.orDie)

      const reopenDue = (now: Date, limit: number) =>
        sql<Reopened>`
          WITH due AS (
            SELECT id, company_id, contact_id, snoozed_until FROM conversations
            WHERE status = 'snoozed' AND snoozed_until <= ${now}
            ORDER BY snoozed_until LIMIT ${limit} FOR UPDATE SKIP LOCKED
          ), reopened AS (
            UPDATE conversations cv SET status = 'open', snoozed_until = NULL, updated_at = ${now}
            FROM due WHERE cv.id = due.id
          )
          SELECT id, company_id, contact_id, snoozed_until FROM due`.pipe(Effect.orDie)

      const groupKey = sql`company_id, reader_id, status, priority, assigned_user_id, assigned_team_id, channel_ids, has_inbound`

      // Folders running at once take disjoint deltas (SKIP LOCKED); groups emptied to zero go.
      const foldCounts = (limit: number) =>
        Effect.gen(function*() {
          const [{ folded }] = yield* sql<{ folded: number }>`
            WITH taken AS (
              DELETE FROM conversation_count_deltas WHERE id IN (
                SELECT id FROM conversation_count_deltas ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED)
              RETURNING ${groupKey}, n
            ), folded AS (
              INSERT INTO conversation_counts (${groupKey}, n)
              SELECT ${groupKey}, sum(n) FROM taken GROUP BY ${groupKey} ORDER BY ${groupKey}
              ON CONFLICT (${groupKey}) DO UPDATE SET n = conversation_counts.n + excluded.n
            )
            SELECT count(*)::int AS folded FROM taken`
          if (folded > 0) yield* sql`DELETE FROM conversation_counts WHERE n = 0`
          return folded
        }).pipe(sql.withTransaction, Effect.orDie)

      return ConversationsRepo.of({
        foldCounts,
        liveChannels,
        list,
        counts,
        find,
        threads,
        lock,
        memberSeeing,
        teamExists,
        assign,
        setStatus,
        setPriority,
        markRead,
        reopenDue
      })
    })
  )
}

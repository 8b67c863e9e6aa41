import type { CompanyId } from "../auth/Domain.ts"
import { Context, Effect, Layer } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { EventEnvelope } from "./Domain.ts"

/** Events written at once from which the statement is planned for its own rows (see `insertMany`). */
const batchPlannedFrom = 16

/** Where an appended event is announced to the other runners, if anywhere. */
export interface Notify {
  readonly channel: string
  readonly node: string
  /** Notices longer than this many bytes carry only the event's id; PostgreSQL caps a NOTIFY payload at 8000 bytes. */
  readonly inlineLimit: number
}

interface EventRow {
  readonly id: number
  readonly company_id: CompanyId
  readonly seq: number
  readonly key: string
  readonly payload: unknown
  readonly created_at: Date
}

/** An event's public id: the webhook's `webhook-id`, stable across retries and the same on every channel. */
export const eventId = (rowId: number | bigint | string) => `evt_${rowId}`

export const toEnvelope = (row: EventRow): EventEnvelope => ({
  id: eventId(row.id),
  seq: Number(row.seq),
  event: row.key,
  company_id: row.company_id,
  occurred_at: row.created_at.toISOString(),
  data: row.payload
})

export class EventsRepo extends Context.Service<EventsRepo, {
  /**
   * Appends an event without its sequence number, in one statement with the caller's companion
   * writes (`along`, data-modifying CTEs such as `done AS (UPDATE …)`). Nothing is locked.
   */
  insert(companyId: CompanyId, key: string, payload: unknown, along?: Statement.Fragment): Effect.Effect<void>
  /**
   * `insert` for many events in one statement, in the given order; with `when` (a condition over
   * `along`'s CTEs) only if it holds, so an event announces a conditional write only when it happened;
   * `when` is checked for each event, which it may read as `v` (`v.key`, `v.payload`).
   */
  insertMany(
    companyId: CompanyId,
    events: ReadonlyArray<{ readonly key: string; readonly payload: unknown }>,
    along?: Statement.Fragment,
    when?: Statement.Fragment
  ): Effect.Effect<void>
  /**
   * Appends many events already numbered, after the company's last number, in the given order: one
   * write per event where `insertMany` plus `sequence` make two. It takes the counter lock, which is
   * held until the caller's transaction ends, so it must be the transaction's last statement (the
   * numbers stay gapless and become visible in order). With `notify`, the other runners are told at
   * commit. Answers the first number and the events' time.
   */
  appendNumbered(
    companyId: CompanyId,
    events: ReadonlyArray<{ readonly key: string; readonly payload: unknown }>,
    notify: Notify | null
  ): Effect.Effect<{ readonly first: number; readonly at: Date; readonly ids: ReadonlyArray<string> }>
  /**
   * Numbers the company's committed, unnumbered events (in append order) after its last number,
   * and announces each with a NOTIFY; answers them in order. One sequencer at a time per company
   * (the counter row is locked first), so numbers are gapless and never handed out twice.
   */
  sequence(companyId: CompanyId, notify: Notify | null): Effect.Effect<ReadonlyArray<EventEnvelope>>
  /** Companies with events committed but not numbered for longer than `olderThanMs`. */
  unsequenced(olderThanMs: number): Effect.Effect<ReadonlyArray<number>>
  /** Each company's last event number (companies with none are left out). */
  heads: Effect.Effect<ReadonlyArray<{ readonly company_id: number; readonly event_seq: number }>>
  after(companyId: CompanyId, after: number, limit: number): Effect.Effect<ReadonlyArray<EventEnvelope>>
}>()("crm/events/EventsRepo") {
  static readonly layer = Layer.effect(
    EventsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = (companyId: CompanyId, key: string, payload: unknown, along?: Statement.Fragment) =>
        sql`
          WITH ${along === undefined ? sql`` : sql`${along},`} e AS (
            INSERT INTO events (company_id, key, payload, created_at)
            VALUES (${companyId}, ${key}, ${JSON.stringify(payload)}::jsonb, date_trunc('milliseconds', now()))
          )
          SELECT 1`.pipe(Effect.asVoid, Effect.orDie)

      // A batch is unprepared, so planned for its own rows: a generic plan cached while the tables the caller's
      // writes touch were small (the start of a broadcast) kept scanning them whole as they grew.
      const insertMany = (
        companyId: CompanyId,
        events: ReadonlyArray<{ readonly key: string; readonly payload: unknown }>,
        along?: Statement.Fragment,
        when?: Statement.Fragment
      ) => {
        const statement = sql`
          WITH ${along === undefined ? sql`` : sql`${along},`} e AS (
            INSERT INTO events (company_id, key, payload, created_at)
            SELECT ${companyId}, v.key, v.payload, date_trunc('milliseconds', now())
            FROM ROWS FROM (jsonb_to_recordset(${JSON.stringify(events)}::jsonb) AS (key text, payload jsonb)) WITH ORDINALITY AS v(key, payload, n)
            ${when === undefined ? sql`` : sql`WHERE ${when}`}
            ORDER BY v.n
          )
          SELECT 1`
        return (events.length >= batchPlannedFrom ? statement.unprepared : statement).pipe(Effect.asVoid, Effect.orDie)
      }

      const appendNumbered = (
        companyId: CompanyId,
        events: ReadonlyArray<{ readonly key: string; readonly payload: unknown }>,
        notify: Notify | null
      ) =>
        sql<{ first: string; at: Date; ids: string }>`
          WITH bumped AS (
            UPDATE companies SET event_seq = event_seq + ${events.length} WHERE id = ${companyId}
            RETURNING event_seq - ${events.length} AS base, date_trunc('milliseconds', now()) AS at
          ), e AS (
            INSERT INTO events (company_id, seq, key, payload, created_at)
            SELECT ${companyId}, b.base + v.n, v.key, v.payload, b.at
            FROM bumped b, ROWS FROM (jsonb_to_recordset(${JSON.stringify(events)}::jsonb) AS (key text, payload jsonb)) WITH ORDINALITY AS v(key, payload, n)
            RETURNING id, seq
          )
          SELECT (base + 1)::text AS first, at, (SELECT json_agg(id::text ORDER BY seq) FROM e)::text AS ids,
            CASE WHEN ${notify?.channel ?? null}::text IS NOT NULL
              THEN pg_notify(${notify?.channel ?? null}::text, json_build_object('n', ${notify?.node ?? null}::text, 'c', ${companyId}::bigint, 'i', base + ${events.length})::text)
            END AS notified
          FROM bumped`.unprepared.pipe(
          Effect.flatMap((rows) => rows.length === 1
            ? Effect.succeed({ first: Number(rows[0].first), at: rows[0].at, ids: (JSON.parse(rows[0].ids) as Array<string>).map(eventId) }) : Effect.die(new Error(`company ${companyId} not found`))),
          Effect.orDie
        )

      // One statement (migration 0140): the check, the counter lock, the numbering and the NOTIFYs.
      const sequence = (companyId: CompanyId, notify: Notify | null) =>
        sql<EventRow>`
          SELECT id, company_id, seq, key, payload, created_at
          FROM number_events(${companyId}, ${notify?.channel ?? null}::text, ${notify?.node ?? null}::text, ${notify?.inlineLimit ?? 0}::int)`.pipe(
          Effect.map((rows) => rows.map(toEnvelope)),
          Effect.orDie
        )

      const unsequenced = (olderThanMs: number) =>
        sql<{ company_id: number }>`
          SELECT DISTINCT company_id FROM events
          WHERE seq IS NULL AND created_at < now() - make_interval(secs => ${olderThanMs / 1000})`.pipe(
          Effect.map((rows) => rows.map((row) => row.company_id)),
          Effect.orDie
        )

      const heads = sql<{ company_id: number; event_seq: number }>`
        SELECT id AS company_id, event_seq FROM companies WHERE event_seq > 0`.pipe(Effect.orDie)

      const after = (companyId: CompanyId, after: number, limit: number) =>
        sql<EventRow>`
          SELECT id, company_id, seq, key, payload, created_at FROM events
          WHERE company_id = ${companyId} AND seq > ${after}
          ORDER BY seq LIMIT ${limit}`.pipe(Effect.map((rows) => rows.map(toEnvelope)), Effect.orDie)
      return EventsRepo.of({ insert, insertMany, appendNumbered, sequence, unsequenced, heads, after })
    })
  )
}

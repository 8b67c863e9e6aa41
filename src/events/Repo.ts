import { Context, Effect, Layer } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { EventEnvelope } from "./Domain.ts"

/** Where an appended event is announced to the other runners, if anywhere. */
export interface Notify {
  readonly channel: string
  readonly node: string
  /** Notices longer than this many bytes carry only the event's id; PostgreSQL caps a NOTIFY payload at 8000 bytes. */
  readonly inlineLimit: number
}

interface EventRow {
  readonly id: number
  readonly company_id: number
  readonly seq: number
  readonly key: string
  readonly payload: unknown
  readonly created_at: Date
}

export const toEnvelope = (row: EventRow): EventEnvelope => ({
  seq: row.seq,
  event: row.key,
  company_id: row.company_id,
  occurred_at: row.created_at.toISOString(),
  data: row.payload
})

export class EventsRepo extends Context.Service<EventsRepo, {
  /**
   * One statement: the caller's companion writes (`along`, data-modifying CTEs such as
   * `done AS (UPDATE …)`), the append, and the NOTIFY. Outside a transaction it is atomic by
   * itself and holds the company's sequence row only for its own commit.
   */
  insert(companyId: number, key: string, payload: unknown, notify: Notify | null, along?: Statement.Fragment): Effect.Effect<EventEnvelope>
  after(companyId: number, after: number, limit: number): Effect.Effect<ReadonlyArray<EventEnvelope>>
  bySeq(companyId: number, seq: number): Effect.Effect<ReadonlyArray<EventEnvelope>>
}>()("crm/events/EventsRepo") {
  static readonly layer = Layer.effect(
    EventsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // The counter row is locked until commit, so a company's events get gapless,
      // commit-ordered sequence numbers that a reconnecting client can resume from.
      const insert = (companyId: number, key: string, payload: unknown, notify: Notify | null, along?: Statement.Fragment) => {
        const announce = notify === null ? sql`` : sql`, pg_notify(${notify.channel}, CASE
            WHEN octet_length(n.inline) <= ${notify.inlineLimit} THEN n.inline
            ELSE json_build_object('n', ${notify.node}::text, 'c', e.company_id, 'i', e.seq)::text END)`
        const inline = notify === null ? sql`` : sql`, LATERAL (SELECT json_build_object('n', ${notify.node}::text, 'c', e.company_id,
            'i', e.seq, 'e', json_build_object('seq', e.seq, 'event', e.key, 'company_id', e.company_id,
            'occurred_at', to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'data', e.payload))::text AS inline) n`
        return sql<EventRow>`
          WITH ${along === undefined ? sql`` : sql`${along},`} next AS (
            UPDATE companies SET event_seq = event_seq + 1 WHERE id = ${companyId} RETURNING event_seq
          ), e AS (
            INSERT INTO events (company_id, seq, key, payload, created_at)
            SELECT ${companyId}, event_seq, ${key}, ${JSON.stringify(payload)}::jsonb, date_trunc('milliseconds', now()) FROM next
            RETURNING id, company_id, seq, key, payload, created_at
          )
          SELECT e.id, e.company_id, e.seq, e.key, e.payload, e.created_at ${announce} FROM e ${inline}`.pipe(
          Effect.map((rows) => toEnvelope(rows[0])),
          Effect.orDie
        )
      }
      const after = (companyId: number, after: number, limit: number) =>
        sql<EventRow>`
          SELECT id, company_id, seq, key, payload, created_at FROM events
          WHERE company_id = ${companyId} AND seq > ${after}
          ORDER BY seq LIMIT ${limit}`.pipe(Effect.map((rows) => rows.map(toEnvelope)), Effect.orDie)
      const bySeq = (companyId: number, seq: number) =>
        sql<EventRow>`
          SELECT id, company_id, seq, key, payload, created_at FROM events
          WHERE company_id = ${companyId} AND seq = ${seq}`.pipe(Effect.map((rows) => rows.map(toEnvelope)), Effect.orDie)
      return EventsRepo.of({ insert, after, bySeq })
    })
  )
}

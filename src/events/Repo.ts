import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import type { EventEnvelope } from "./Domain.ts"

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
  insert(companyId: number, key: string, payload: unknown): Effect.Effect<EventEnvelope>
  after(companyId: number, after: number, limit: number): Effect.Effect<ReadonlyArray<EventEnvelope>>
  bySeq(companyId: number, seq: number): Effect.Effect<ReadonlyArray<EventEnvelope>>
}>()("crm/events/EventsRepo") {
  static readonly layer = Layer.effect(
    EventsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // The counter row is locked until commit, so a company's events get gapless,
      // commit-ordered sequence numbers that a reconnecting client can resume from.
      const insert = (companyId: number, key: string, payload: unknown) =>
        sql<EventRow>`
          WITH next AS (
            UPDATE companies SET event_seq = event_seq + 1 WHERE id = ${companyId} RETURNING event_seq
          )
          INSERT INTO events (company_id, seq, key, payload)
          SELECT ${companyId}, event_seq, ${key}, ${JSON.stringify(payload)}::jsonb FROM next
          RETURNING id, company_id, seq, key, payload, created_at`.pipe(
          Effect.map((rows) => toEnvelope(rows[0])),
          Effect.orDie
        )
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

import { Context, Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { Events } from "../events/Events.ts"
import type { WebhookSettings } from "./Domain.ts"

export interface ActiveIntegration {
  readonly id: number
  readonly company_id: number
  /** Events it has not read yet, or deliveries due and not leased. */
  readonly work: boolean
}

/** An integration as a delivery needs it; `updated_at` tells a cached copy is stale. */
export interface DeliveryTarget {
  readonly id: number
  readonly company_id: number
  readonly settings: WebhookSettings
  readonly secrets: Uint8Array
  readonly updated_at: Date
}

export interface ClaimedDelivery {
  readonly id: number
  readonly integration_id: number
  readonly company_id: number
  readonly event_id: number
  readonly attempts: number
  readonly key: string
  /** The event's number in its company (deliveries are made for numbered events only). */
  readonly seq: number
  readonly created_at: Date
  readonly data: string
  /** The integration's `updated_at` when claimed. */
  readonly updated_at: Date
  readonly lease_until: Date
}

/**
 * Up to `limit` due deliveries of an integration, queued on this runner behind `ahead` others and run
 * `slots` at a time: the n-th is leased for as many timeouts as can pass before its attempt ends.
 */
export interface ClaimRequest {
  readonly integrationId: number
  readonly limit: number
  readonly ahead: number
  readonly slots: number
  readonly timeoutMs: number
}

/** The outcome of one attempt, written with others in one transaction. */
export interface AttemptResult {
  readonly deliveryId: number
  readonly leaseToken: string
  readonly companyId: number
  readonly integrationId: number
  readonly attempt: number
  readonly ok: boolean
  /** 410 Gone: the receiver asked to be forgotten. */
  readonly gone: boolean
  readonly statusCode: number | null
  readonly durationMs: number
  readonly error: string | null
  readonly eventKey: string
  readonly webhookId: string
  readonly at: Date
  /** Null when this attempt was the last (success, 410, retries off or exhausted). */
  readonly nextAttemptAt: Date | null
}

/** Failures in a row (and for how long) after which an integration is disabled. */
export const disableAfter = { failures: 100, hours: 24 }

const iso = (d: Date | null) => (d === null ? null : d.toISOString())

/** The delivery outbox: every statement runs for the worker, across companies, but names each row's company. */
export class DeliveryRepo extends Context.Service<DeliveryRepo, {
  active(now: Date): Effect.Effect<ReadonlyArray<ActiveIntegration>>
  /**
   * One transaction for every integration asked for: turns the next committed events after each active
   * integration's cursor (up to `eventBatch`) into delivery rows (those it subscribes to and its channel
   * filter lets through) and advances the cursors; then leases due deliveries to `token`, for each
   * request whose integration is active and has no unexpired lease of another runner (whose requests
   * count against the cap). Answers, per integration, the events read, and the leased deliveries.
   */
  claim(options: {
    readonly integrationIds: ReadonlyArray<number>
    readonly requests: ReadonlyArray<ClaimRequest>
    readonly now: Date
    readonly eventBatch: number
    readonly leaseMarginMs: number
    readonly token: string
  }): Effect.Effect<{ readonly scanned: ReadonlyMap<number, number>; readonly deliveries: ReadonlyArray<ClaimedDelivery> }>
  targets(integrationIds: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<DeliveryTarget>>
  record(results: ReadonlyArray<AttemptResult>, now: Date): Effect.Effect<void>
  prune(olderThan: Date): Effect.Effect<void>
}>()("crm/integrations/DeliveryRepo") {
  static readonly layer = Layer.effect(
    DeliveryRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const events = yield* Events

      const active = (now: Date) =>
        sql<ActiveIntegration>`
          SELECT i.id, i.company_id, (COALESCE(w.cursor_seq, i.cursor_seq) < c.event_seq OR EXISTS (
              SELECT 1 FROM webhook_deliveries d
              WHERE d.integration_id = i.id AND d.state = 'pending' AND d.next_attempt_at <= ${now.toISOString()}::timestamptz
                AND (d.lease_until IS NULL OR d.lease_until <= ${now.toISOString()}::timestamptz)
            )) AS work
          FROM integrations i JOIN companies c ON c.id = i.company_id LEFT JOIN webhook_cursors w ON w.integration_id = i.id
          WHERE i.status = 'active'`.pipe(
          Effect.map((rows) => rows.map((r) => ({ id: Number(r.id), company_id: Number(r.company_id), work: r.work }))),
          Effect.orDie
        )

      const claim = (o: {
        readonly integrationIds: ReadonlyArray<number>
        readonly requests: ReadonlyArray<ClaimRequest>
        readonly now: Date
        readonly eventBatch: number
        readonly leaseMarginMs: number
        readonly token: string
      }) =>
        Effect.gen(function*() {
          const now = o.now.toISOString()
          // Neither outcome nor cursor is lost if this commit is: rows are re-made (ON CONFLICT) and
          // leases re-taken. Outcomes (record) are written with the server's synchronous commit.
          yield* sql`SET LOCAL synchronous_commit = off`
          const scanned = new Map<number, number>()
          if (o.integrationIds.length > 0) {
            // One statement for all. Two runners reading the same range at once insert each row once (ON
            // CONFLICT) and the cursor only moves forward; the cursor has its own row so this never waits
            // for an outcome's commit (which locks the integration's row).
            const rows = yield* sql<{ integration_id: number; scanned: number }>`
              WITH ints AS (
                SELECT i.id, i.company_id, i.settings, COALESCE(w.cursor_seq, i.cursor_seq) AS cursor_seq
                FROM integrations i JOIN companies c ON c.id = i.company_id
                  LEFT JOIN webhook_cursors w ON w.integration_id = i.id
                WHERE i.id IN (SELECT jsonb_array_elements_text(${JSON.stringify(o.integrationIds)}::jsonb)::bigint)
                  AND i.status = 'active' AND COALESCE(w.cursor_seq, i.cursor_seq) < c.event_seq
              ), ev AS (
                SELECT ints.id AS integration_id, ints.company_id, ints.settings, e.id, e.seq, e.key, e.payload
                FROM ints CROSS JOIN LATERAL (
                  SELECT e.id, e.seq, e.key, e.payload FROM events e
                  WHERE e.company_id = ints.company_id AND e.seq > ints.cursor_seq
                  ORDER BY e.seq LIMIT ${o.eventBatch}
                ) e
              ), ins AS (
                INSERT INTO webhook_deliveries (company_id, integration_id, event_id, state, next_attempt_at, created_at)
                SELECT ev.company_id, ev.integration_id, ev.id, 'pending', ${now}::timestamptz, ${now}::timestamptz
                FROM ev
                WHERE (ev.settings -> 'selectedEventKeys') @> to_jsonb(ev.key)
                  AND (ev.settings ->> 'channelFilter' IS DISTINCT FROM 'selected'
                    OR jsonb_typeof(ev.payload -> 'channel_id') IS DISTINCT FROM 'number'
                    OR (ev.settings -> 'channelIds') @> (ev.payload -> 'channel_id'))
                ORDER BY ev.integration_id, ev.seq
                ON CONFLICT (integration_id, event_id) DO NOTHING
              ), read AS (
                SELECT integration_id, max(seq) AS seq, count(*)::int AS scanned FROM ev GROUP BY integration_id
              ), moved AS (
                INSERT INTO webhook_cursors (integration_id, cursor_seq) SELECT integration_id, seq FROM read
                ON CONFLICT (integration_id) DO UPDATE SET cursor_seq = GREATEST(webhook_cursors.cursor_seq, EXCLUDED.cursor_seq)
              )
              SELECT integration_id, scanned FROM read`
            for (const r of rows) scanned.set(Number(r.integration_id), r.scanned)
          }
          if (o.requests.length === 0) return { scanned, deliveries: [] }
          const requests = o.requests.map((r) => ({ id: r.integrationId, n: r.limit, ahead: r.ahead, slots: r.slots, timeout_ms: r.timeoutMs }))
          const deliveries = yield* sql<ClaimedDelivery>`
            WITH wanted AS (
              SELECT w.*, i.updated_at FROM jsonb_to_recordset(${JSON.stringify(requests)}::jsonb)
                AS w(id bigint, n int, ahead int, slots int, timeout_ms int)
              JOIN integrations i ON i.id = w.id AND i.status = 'active'
              WHERE NOT EXISTS (
                SELECT 1 FROM webhook_deliveries f
                WHERE f.integration_id = w.id AND f.state = 'pending' AND f.lease_token IS NOT NULL
                  AND f.lease_token <> ${o.token} AND f.lease_until > ${now}::timestamptz
              )
            ), locked AS (
              SELECT wanted.id AS integration_id, p.id, p.next_attempt_at FROM wanted CROSS JOIN LATERAL (
                SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
                WHERE d.integration_id = wanted.id AND d.state = 'pending' AND d.next_attempt_at <= ${now}::timestamptz
                  AND (d.lease_until IS NULL OR d.lease_until <= ${now}::timestamptz)
                ORDER BY d.next_attempt_at, d.id LIMIT wanted.n FOR UPDATE SKIP LOCKED
              ) p
            ), picked AS (
              SELECT l.id, w.updated_at, ${now}::timestamptz + make_interval(secs => (
                ((w.ahead + row_number() OVER (PARTITION BY l.integration_id ORDER BY l.next_attempt_at, l.id) - 1) / w.slots + 1)
                  * w.timeout_ms + ${o.leaseMarginMs}) / 1000.0) AS lease
              FROM locked l JOIN wanted w ON w.id = l.integration_id
            )
            UPDATE webhook_deliveries d SET lease_until = picked.lease, lease_token = ${o.token}
            FROM picked, events e WHERE d.id = picked.id AND e.id = d.event_id
            RETURNING d.id, d.integration_id, d.company_id, d.event_id, d.attempts, e.key, e.seq, e.created_at,
              e.payload::text AS data, picked.updated_at, d.lease_until`
          return {
            scanned,
            deliveries: deliveries
              .map((d) => ({ ...d, id: Number(d.id), integration_id: Number(d.integration_id), company_id: Number(d.company_id), event_id: Number(d.event_id), seq: Number(d.seq) }))
              .sort((a, b) => a.lease_until.getTime() - b.lease_until.getTime() || a.id - b.id)
          }
        }).pipe(sql.withTransaction, Effect.orDie)

      const targets = (ids: ReadonlyArray<number>) =>
        sql<DeliveryTarget>`
          SELECT id, company_id, settings, secrets, updated_at FROM integrations
          WHERE id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb)::bigint)`.pipe(
          Effect.map((rows) => rows.map((r) => ({ ...r, id: Number(r.id), company_id: Number(r.company_id) }))),
          Effect.orDie
        )

      const record = (results: ReadonlyArray<AttemptResult>, now: Date) =>
        Effect.gen(function*() {
          const rows = results.map((r) => ({
            id: r.deliveryId,
            token: r.leaseToken,
            state: r.ok ? "delivered" : r.nextAttemptAt === null ? "failed" : "pending",
            attempt: r.attempt,
            next: iso(r.nextAttemptAt),
            finished: r.ok || r.nextAttemptAt === null ? r.at.toISOString() : null
          }))
          // Only the lease holder's outcome counts: a delivery whose lease expired and was taken over is not overwritten.
          const updated = yield* sql<{ id: number }>`
            UPDATE webhook_deliveries d SET state = v.state, attempts = v.attempt,
              next_attempt_at = COALESCE(v.next, d.next_attempt_at), finished_at = v.finished,
              lease_until = NULL, lease_token = NULL
            FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
              AS v(id bigint, token text, state text, attempt int, next timestamptz, finished timestamptz)
            WHERE d.id = v.id AND d.lease_token = v.token AND d.state = 'pending'
            RETURNING d.id`
          const kept = new Set(updated.map((u) => Number(u.id)))
          const accepted = results.filter((r) => kept.has(r.deliveryId))
          if (accepted.length === 0) return

          const byIntegration = new Map<number, Array<AttemptResult>>()
          for (const r of accepted) {
            const list = byIntegration.get(r.integrationId) ?? []
            list.push(r)
            byIntegration.set(r.integrationId, list)
          }
          // One statement for every integration's health; the rows are locked first in id order, so two
          // runners recording at once wait for each other instead of deadlocking.
          const health = [...byIntegration.keys()].sort((a, b) => a - b).map((integrationId) => {
            const list = byIntegration.get(integrationId)!.sort((a, b) => a.at.getTime() - b.at.getTime())
            const lastSuccess = list.filter((r) => r.ok).at(-1)
            const failures = list.filter((r) => !r.ok)
            const tail = lastSuccess === undefined ? failures : failures.filter((r) => r.at.getTime() >= lastSuccess.at.getTime())
            return {
              id: integrationId,
              success: iso(lastSuccess?.at ?? null),
              failure: iso(failures.at(-1)?.at ?? null),
              error: failures.at(-1)?.error ?? null,
              // A success in the batch restarts the streak at the failures after it.
              restart: lastSuccess !== undefined,
              tail: tail.length,
              tail_from: iso(tail[0]?.at ?? null),
              gone: list.some((r) => r.gone)
            }
          })
          const ids = JSON.stringify(health.map((h) => h.id))
          yield* sql`
            SELECT 1 FROM integrations WHERE id IN (SELECT jsonb_array_elements_text(${ids}::jsonb)::bigint)
            ORDER BY id FOR NO KEY UPDATE`
          const healthRows = yield* sql<{ id: number; company_id: number; name: string; status: string; consecutive_failures: number; failing_since: Date | null; last_error: string | null; gone: boolean }>`
            UPDATE integrations i SET
              last_success_at = GREATEST(i.last_success_at, v.success),
              last_failure_at = GREATEST(i.last_failure_at, v.failure),
              last_error = COALESCE(v.error, i.last_error),
              consecutive_failures = CASE WHEN v.restart THEN v.tail ELSE i.consecutive_failures + v.tail END,
              failing_since = CASE WHEN v.tail = 0 THEN NULL WHEN v.restart THEN v.tail_from
                ELSE COALESCE(i.failing_since, v.tail_from) END
            FROM jsonb_to_recordset(${JSON.stringify(health)}::jsonb)
              AS v(id bigint, success timestamptz, failure timestamptz, error text, restart boolean, tail int, tail_from timestamptz, gone boolean)
            WHERE i.id = v.id
            RETURNING i.id, i.company_id, i.name, i.status, i.consecutive_failures, i.failing_since, i.last_error, v.gone`
          const alive = new Set<number>()
          for (const h of healthRows.map((u) => ({ ...u, id: Number(u.id) })).sort((a, b) => a.id - b.id)) {
            alive.add(h.id)
            const streak = h.consecutive_failures >= disableAfter.failures && h.failing_since !== null &&
              now.getTime() - h.failing_since.getTime() >= disableAfter.hours * 3600_000
            if (h.status === "active" && (h.gone || streak)) {
              yield* sql`UPDATE integrations SET status = 'disabled', updated_at = ${now.toISOString()}::timestamptz WHERE id = ${h.id}`
              yield* events.emit(Number(h.company_id), "integration.disabled", {
                id: h.id,
                integration_id: h.id,
                name: h.name,
                reason: h.gone ? "gone" : "consecutive_failures",
                consecutive_failures: h.consecutive_failures,
                last_error: h.last_error
              })
            }
          }

          const logs = accepted.filter((r) => alive.has(r.integrationId)).map((r) => {
            const status = r.ok ? "delivered" : r.nextAttemptAt === null ? "failed" : "retrying"
            const outcome = r.ok
              ? `answered HTTP ${r.statusCode}`
              : r.error ?? `answered HTTP ${r.statusCode}`
            return {
              company_id: r.companyId,
              integration_id: r.integrationId,
              level: r.ok ? "info" : "error",
              message: `Delivery of ${r.eventKey} (attempt ${r.attempt}) ${r.ok ? "succeeded" : status === "retrying" ? "failed, will retry" : "failed"}: ${outcome}`,
              context: {
                event_key: r.eventKey,
                status,
                status_code: r.statusCode,
                duration_ms: r.durationMs,
                attempt: r.attempt,
                webhook_id: r.webhookId
              },
              created_at: r.at.toISOString()
            }
          })
          if (logs.length > 0) {
            yield* sql`
              INSERT INTO integration_logs (company_id, integration_id, level, code, message, context, created_at)
              SELECT v.company_id, v.integration_id, v.level, 'webhook.delivery', v.message, v.context, v.created_at
              FROM jsonb_to_recordset(${JSON.stringify(logs)}::jsonb)
                AS v(company_id bigint, integration_id bigint, level text, message text, context jsonb, created_at timestamptz)`
          }
        }).pipe(sql.withTransaction)

      const prune = (olderThan: Date) =>
        Effect.gen(function*() {
          yield* sql`DELETE FROM integration_logs WHERE created_at < ${olderThan.toISOString()}::timestamptz`
          yield* sql`DELETE FROM webhook_deliveries WHERE state <> 'pending' AND finished_at < ${olderThan.toISOString()}::timestamptz`
        }).pipe(Effect.orDie)

      return DeliveryRepo.of({
        active,
        claim,
        targets,
        // A deadlock or a dropped connection must not lose outcomes: an unrecorded success would be sent again.
        record: (results, now) =>
          record(results, now).pipe(Effect.retry({ times: 8, schedule: Schedule.exponential("50 millis") }), Effect.orDie),
        prune
      })
    })
  )
}



import { Context, Effect, Layer, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import type { WebhookSettings } from "./Domain.ts"

export interface ActiveIntegration {
  readonly id: number
  readonly company_id: number
  /** Events it has not read yet, or deliveries due and not leased. */
  readonly work: boolean
}

export interface ClaimedDelivery {
  readonly id: number
  readonly event_id: number
  readonly attempts: number
  readonly key: string
  readonly created_at: Date
  readonly data: string
}

export interface Claim {
  readonly settings: WebhookSettings
  readonly secrets: Uint8Array
  /** Events read from the log in this claim. */
  readonly scanned: number
  readonly deliveries: ReadonlyArray<ClaimedDelivery>
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
   * One transaction: turns the next committed events after the integration's cursor into delivery
   * rows (those it subscribes to and its channel filter lets through) and advances the cursor; then,
   * unless another runner holds unexpired leases on the integration's deliveries, leases up to
   * `limit` due ones to `token` until `ceil(limit / concurrency) × timeout + leaseMarginMs` from now.
   * Null when the integration is not active.
   */
  claim(companyId: CompanyId, integrationId: number, options: {
    readonly now: Date
    readonly eventBatch: number
    readonly perSlot: number
    readonly leaseMarginMs: number
    readonly token: string
  }): Effect.Effect<Claim | null>
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
          SELECT i.id, i.company_id, (i.cursor_seq < c.event_seq OR EXISTS (
              SELECT 1 FROM webhook_deliveries d
              WHERE d.integration_id = i.id AND d.state = 'pending' AND d.next_attempt_at <= ${now.toISOString()}::timestamptz
                AND (d.lease_until IS NULL OR d.lease_until <= ${now.toISOString()}::timestamptz)
            )) AS work
          FROM integrations i JOIN companies c ON c.id = i.company_id
          WHERE i.status = 'active'`.pipe(
          Effect.map((rows) => rows.map((r) => ({ id: Number(r.id), company_id: Number(r.company_id), work: r.work }))),
          Effect.orDie
        )

      const claim = (companyId: CompanyId, integrationId: number, o: {
        readonly now: Date
        readonly eventBatch: number
        readonly perSlot: number
        readonly leaseMarginMs: number
        readonly token: string
      }) =>
        Effect.gen(function*() {
          const now = o.now.toISOString()
          // Neither outcome nor cursor is lost if this commit is: rows are re-made (ON CONFLICT) and
          // leases re-taken. Outcomes (record) are written with the server's synchronous commit.
          yield* sql`SET LOCAL synchronous_commit = off`
          const found = yield* sql<{ settings: WebhookSettings; secrets: Uint8Array; foreign: boolean }>`
            SELECT settings, secrets, EXISTS (
                SELECT 1 FROM webhook_deliveries
                WHERE integration_id = ${integrationId} AND state = 'pending' AND lease_token IS NOT NULL
                  AND lease_token <> ${o.token} AND lease_until > ${now}::timestamptz
              ) AS foreign
            FROM integrations WHERE company_id = ${companyId} AND id = ${integrationId} AND status = 'active' FOR UPDATE`
          if (found.length === 0) return null
          const { settings, secrets } = found[0]
          const scanned = yield* sql<{ scanned: number }>`
            WITH ev AS (
              SELECT e.id, e.seq, e.key, e.payload FROM events e
              WHERE e.company_id = ${companyId}
                AND e.seq > (SELECT cursor_seq FROM integrations WHERE id = ${integrationId})
              ORDER BY e.seq LIMIT ${o.eventBatch}
            ), ins AS (
              INSERT INTO webhook_deliveries (company_id, integration_id, event_id, state, next_attempt_at, created_at)
              SELECT ${companyId}, ${integrationId}, ev.id, 'pending', ${now}::timestamptz, ${now}::timestamptz
              FROM ev
              WHERE ${JSON.stringify(settings.selectedEventKeys)}::jsonb @> to_jsonb(ev.key)
                AND (${settings.channelFilter} <> 'selected'
                  OR jsonb_typeof(ev.payload -> 'channel_id') IS DISTINCT FROM 'number'
                  OR ${JSON.stringify(settings.channelIds)}::jsonb @> (ev.payload -> 'channel_id'))
              ORDER BY ev.seq
              ON CONFLICT (integration_id, event_id) DO NOTHING
            ), moved AS (
              UPDATE integrations SET cursor_seq = (SELECT max(seq) FROM ev)
              WHERE id = ${integrationId} AND EXISTS (SELECT 1 FROM ev)
            )
            SELECT count(*)::int AS scanned FROM ev`
          // Another runner is delivering for this integration: its requests count against the cap.
          if (found[0].foreign) return { settings, secrets, scanned: scanned[0].scanned, deliveries: [] }
          const limit = settings.concurrency * o.perSlot
          const leaseMs = Math.ceil(limit / settings.concurrency) * settings.timeoutSeconds * 1000 + o.leaseMarginMs
          const leaseUntil = new Date(o.now.getTime() + leaseMs).toISOString()
          const deliveries = yield* sql<ClaimedDelivery>`
            WITH picked AS (
              SELECT id FROM webhook_deliveries
              WHERE integration_id = ${integrationId} AND state = 'pending' AND next_attempt_at <= ${now}::timestamptz
                AND (lease_until IS NULL OR lease_until <= ${now}::timestamptz)
              ORDER BY next_attempt_at, id LIMIT ${limit} FOR UPDATE SKIP LOCKED
            )
            UPDATE webhook_deliveries d SET lease_until = ${leaseUntil}::timestamptz, lease_token = ${o.token}
            FROM picked, events e WHERE d.id = picked.id AND e.id = d.event_id
            RETURNING d.id, d.event_id, d.attempts, e.key, e.created_at, e.payload::text AS data`
          return {
            settings,
            secrets,
            scanned: scanned[0].scanned,
            deliveries: deliveries
              .map((d) => ({ ...d, id: Number(d.id), event_id: Number(d.event_id) }))
              .sort((a, b) => a.id - b.id)
          }
        }).pipe(sql.withTransaction, Effect.orDie)

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
          const alive = new Set<number>()
          for (const integrationId of [...byIntegration.keys()].sort((a, b) => a - b)) {
            const list = byIntegration.get(integrationId)!.sort((a, b) => a.at.getTime() - b.at.getTime())
            const successes = list.filter((r) => r.ok)
            const failures = list.filter((r) => !r.ok)
            const lastSuccess = successes.at(-1)
            const tail = lastSuccess === undefined ? failures : failures.filter((r) => r.at.getTime() >= lastSuccess.at.getTime())
            const gone = list.find((r) => r.gone)
            const health = yield* sql<{ company_id: number; name: string; status: string; consecutive_failures: number; failing_since: Date | null; last_error: string | null }>`
              UPDATE integrations SET
                last_success_at = GREATEST(last_success_at, ${iso(lastSuccess?.at ?? null)}::timestamptz),
                last_failure_at = GREATEST(last_failure_at, ${iso(failures.at(-1)?.at ?? null)}::timestamptz),
                last_error = COALESCE(${failures.at(-1)?.error ?? null}::text, last_error),
                consecutive_failures = ${lastSuccess === undefined ? sql`consecutive_failures + ${tail.length}` : sql`${tail.length}`},
                failing_since = ${
              tail.length === 0
                ? sql`NULL`
                : lastSuccess === undefined
                ? sql`COALESCE(failing_since, ${tail[0].at.toISOString()}::timestamptz)`
                : sql`${tail[0].at.toISOString()}::timestamptz`
            }
              WHERE id = ${integrationId}
              RETURNING company_id, name, status, consecutive_failures, failing_since, last_error`
            if (health.length === 0) continue
            alive.add(integrationId)
            const h = health[0]
            const streak = h.consecutive_failures >= disableAfter.failures && h.failing_since !== null &&
              now.getTime() - h.failing_since.getTime() >= disableAfter.hours * 3600_000
            if (h.status === "active" && (gone !== undefined || streak)) {
              yield* sql`UPDATE integrations SET status = 'disabled', updated_at = ${now.toISOString()}::timestamptz WHERE id = ${integrationId}`
              yield* events.emit(Number(h.company_id), "integration.disabled", {
                id: integrationId,
                integration_id: integrationId,
                name: h.name,
                reason: gone !== undefined ? "gone" : "consecutive_failures",
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
        // A deadlock or a dropped connection must not lose outcomes: an unrecorded success would be sent again.
        record: (results, now) =>
          record(results, now).pipe(Effect.retry({ times: 8, schedule: Schedule.exponential("50 millis") }), Effect.orDie),
        prune
      })
    })
  )
}

export const companyOf = (id: number) => CompanyId.make(id)

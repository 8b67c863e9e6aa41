import { Clock, Effect, Latch, Layer, Option, PubSub, Queue, Random, Result } from "effect"
import { randomUUID } from "node:crypto"
import { Events } from "../events/Events.ts"
import { AppConfig } from "../platform/Config.ts"
import { OutboundHttp } from "../platform/OutboundHttp.ts"
import { Credentials } from "../providers/Credentials.ts"
import { type AttemptResult, type ClaimedDelivery, type ClaimRequest, DeliveryRepo } from "./DeliveryRepo.ts"
import type { Secrets, WebhookSettings } from "./Domain.ts"
import { backoffMillis, deliveryHeaders, envelope } from "./Signing.ts"
import { eventId } from "../events/Repo.ts"

/** Events read from the log per integration and round. */
const eventBatch = 1000
/** Deliveries an integration may have claimed on this runner: this many per concurrency slot. */
const perSlot = 8
/** Outcomes written per transaction. */
const flushBatch = 500
const retention = 30 * 24 * 3600_000
const pruneEveryMs = 10 * 60_000

interface Target {
  updatedAt: number
  settings: WebhookSettings
  /** Null when they no longer decrypt. */
  secrets: Secrets | null
  /** Claimed on this runner, in lease order, not yet started. */
  readonly queue: Array<ClaimedDelivery>
  /** Requests in flight: at most `settings.concurrency`. */
  running: number
  /** The last claim got all it asked for: there may be more due. */
  more: boolean
}

/**
 * Webhook delivery, a consumer of committed events. Deliveries are rows (`webhook_deliveries`) made
 * from the event log behind a per-integration cursor, so nothing lives only in memory: a restart, or
 * another runner, carries on from the table. The event bus wakes the worker; a poll finds due retries
 * and anything a wake-up missed.
 *
 * Each round is one transaction for every integration with work: one statement reads the new events of
 * all of them into delivery rows, one leases due deliveries to this runner, up to `concurrency × 8`
 * outstanding per integration. They wait in a queue per integration and run at most `concurrency` at a
 * time, on kept-alive connections; each is leased for as many timeouts as can pass before its own
 * attempt ends, plus WEBHOOK_LEASE_MARGIN_MS, and is not sent if it could outlast its lease. While
 * another runner holds unexpired leases on an integration this one claims nothing for it, so the cap
 * holds across runners. The outcome is written only by the lease's
 * holder, in batches: once a 2xx is recorded the delivery is never sent again. A runner that dies
 * leaves leases that expire, and those attempts are made again (at least once; exactly once after a
 * recorded success).
 */
export const WebhookDeliveryLayer = Layer.effectDiscard(Effect.gen(function*() {
  const events = yield* Events
  const repo = yield* DeliveryRepo
  const outbound = yield* OutboundHttp
  const credentials = yield* Credentials
  const config = yield* AppConfig
  const subscription = yield* events.subscribe
  const token = randomUUID()
  const scope = yield* Effect.scope

  const wake = yield* Latch.make(true)
  const dirty = new Set<number>()
  let companies = new Map<number, ReadonlyArray<number>>()
  const targets = new Map<number, Target>()
  const results = yield* Queue.unbounded<AttemptResult>()
  // Runs last at shutdown (after the batches and the writer stop): outcomes already known are recorded, so an
  // attempt that was answered is not made again once its lease expires.
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      const done = yield* Queue.clear(results)
      if (done.length > 0) yield* repo.record(done, new Date(yield* Clock.currentTimeMillis))
    }).pipe(Effect.catchCause((cause) => Effect.logWarning("webhook outcomes not recorded at shutdown; their leases will expire", cause)))
  )

  const refresh = Effect.gen(function*() {
    const active = yield* repo.active(new Date(yield* Clock.currentTimeMillis))
    const next = new Map<number, Array<number>>()
    for (const i of active) {
      next.set(i.company_id, [...(next.get(i.company_id) ?? []), i.id])
      if (i.work) dirty.add(i.id)
    }
    companies = next
    // Deleted or disabled, and nothing of theirs left here.
    const live = new Set(active.map((i) => i.id))
    for (const [id, t] of targets) if (!live.has(id) && t.running === 0 && t.queue.length === 0) targets.delete(id)
    yield* Latch.open(wake)
  })

  /** The integration's settings and decrypted secrets, read again when it changed since they were cached. */
  const load = Effect.fnUntraced(function*(stale: ReadonlyArray<number>) {
    for (const t of yield* repo.targets(stale)) {
      // Never sent unsigned: secrets that no longer decrypt (APP_KEY changed) fail the attempt until rotated.
      const secrets = Option.getOrNull(credentials.decrypt(t.company_id, t.secrets)) as Secrets | null
      const known = targets.get(t.id)
      if (known === undefined) {
        targets.set(t.id, { updatedAt: t.updated_at.getTime(), settings: t.settings, secrets, queue: [], running: 0, more: true })
        continue
      }
      known.updatedAt = t.updated_at.getTime()
      known.settings = t.settings
      known.secrets = secrets
    }
  })

  const attempt = Effect.fnUntraced(function*(target: Target, d: ClaimedDelivery) {
    const { settings, secrets } = target
    const started = yield* Clock.currentTimeMillis
    // A request that could outlast its lease is not sent: the lease lapses and the delivery is claimed again.
    if (started + settings.timeoutSeconds * 1000 > d.lease_until.getTime()) return
    const id = eventId(d.event_id)
    const body = envelope({ id, seq: d.seq, event: d.key, companyId: d.company_id, occurredAt: d.created_at.toISOString(), dataJson: d.data })
    const sent = secrets === null
      ? Result.fail({ message: "The integration's secrets could not be decrypted; set them again (PATCH secrets)." })
      : yield* Effect.result(outbound.request({
        url: settings.url,
        headers: deliveryHeaders(settings, secrets, id, Math.floor(started / 1000), body),
        body,
        timeoutMs: settings.timeoutSeconds * 1000,
        allowPrivate: config.webhookAllowPrivate
      }))
    const ended = yield* Clock.currentTimeMillis
    const statusCode = Result.isSuccess(sent) ? sent.success.status : null
    const ok = statusCode !== null && statusCode >= 200 && statusCode < 300
    const gone = statusCode === 410
    const number = d.attempts + 1
    const retry = !ok && !gone && settings.retryEnabled && number < settings.maxAttempts
    const wait = retry ? backoffMillis(number, yield* Random.next, config.webhookBackoffScale) : 0
    yield* Queue.offer(results, {
      deliveryId: d.id,
      leaseToken: token,
      companyId: d.company_id,
      integrationId: d.integration_id,
      attempt: number,
      ok,
      gone,
      statusCode,
      durationMs: ended - started,
      error: ok ? null : Result.isFailure(sent) ? sent.failure.message : `The receiver answered HTTP ${statusCode}.`,
      eventKey: d.key,
      webhookId: id,
      at: new Date(ended),
      nextAttemptAt: retry ? new Date(ended + wait) : null
    })
  })

  /** Starts queued deliveries while the integration has free slots; each finished one starts the next. */
  const drain = (t: Target): Effect.Effect<void> =>
    Effect.suspend(() => {
      const starting: Array<ClaimedDelivery> = []
      while (t.running < t.settings.concurrency && t.queue.length > 0) {
        starting.push(t.queue.shift()!)
        t.running++
      }
      return Effect.forEach(starting, (d) =>
        attempt(t, d).pipe(
          Effect.catchCause((cause) => Effect.logWarning("webhook attempt failed", cause)),
          Effect.ensuring(Effect.suspend(() => {
            t.running--
            if (t.more || t.running + t.queue.length === 0) dirty.add(d.integration_id)
            return Effect.andThen(drain(t), Latch.open(wake))
          })),
          Effect.forkIn(scope)
        ), { discard: true })
    })

  const round = Effect.fnUntraced(function*(ids: ReadonlyArray<number>) {
    const now = new Date(yield* Clock.currentTimeMillis)
    const requests: Array<ClaimRequest> = []
    for (const id of ids) {
      const t = targets.get(id)
      // Not known yet: a small first claim, and its settings are read.
      const slots = t?.settings.concurrency ?? 1
      const ahead = t === undefined ? 0 : t.running + t.queue.length
      const limit = slots * perSlot - ahead
      if (limit > 0) requests.push({ integrationId: id, limit, ahead, slots, timeoutMs: (t?.settings.timeoutSeconds ?? 30) * 1000 })
    }
    const claimed = yield* repo.claim({ integrationIds: ids, requests, now, eventBatch, leaseMarginMs: config.webhookLeaseMarginMs, token })
    for (const [id, scanned] of claimed.scanned) if (scanned === eventBatch) dirty.add(id)
    const got = new Map<number, ClaimedDelivery>()
    const counts = new Map<number, number>()
    for (const d of claimed.deliveries) {
      got.set(d.integration_id, d)
      counts.set(d.integration_id, (counts.get(d.integration_id) ?? 0) + 1)
    }
    const stale = [...got.values()].filter((d) => targets.get(d.integration_id)?.updatedAt !== d.updated_at.getTime()).map((d) => d.integration_id)
    if (stale.length > 0) yield* load(stale)
    for (const r of requests) {
      const t = targets.get(r.integrationId)
      if (t === undefined) continue
      t.more = (counts.get(r.integrationId) ?? 0) >= r.limit
      if (t.more) dirty.add(r.integrationId)
    }
    const touched = new Set<Target>()
    for (const d of claimed.deliveries) {
      // Deleted since the claim: nothing to send to.
      const t = targets.get(d.integration_id)
      if (t === undefined) continue
      t.queue.push(d)
      touched.add(t)
    }
    yield* Effect.forEach(touched, drain, { discard: true })
  })

  // One round at a time: the latch is closed before the dirty set is read, so a wake-up during a
  // round opens it again for the next.
  yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
    yield* Latch.await(wake)
    yield* Latch.close(wake)
    const ids = [...dirty]
    dirty.clear()
    if (ids.length === 0) return
    yield* round(ids).pipe(
      Effect.catchCause((cause) =>
        Effect.andThen(
          Effect.logWarning("webhook delivery round failed", cause),
          // Tried again on the next poll rather than at once.
          Effect.sync(() => ids.forEach((id) => dirty.add(id)))
        )
      )
    )
  })))
  // Outcomes are written in batches; due retries are found by the poll.
  yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
    const done = yield* Queue.takeBetween(results, 1, flushBatch)
    yield* repo.record(done, new Date(yield* Clock.currentTimeMillis))
  }).pipe(Effect.catchCause((cause) => Effect.logError("webhook outcomes not recorded; their leases will expire and they are retried", cause)))))

  yield* Effect.forkScoped(Effect.forever(
    PubSub.take(subscription).pipe(
      Effect.flatMap((event) => {
        for (const id of companies.get(event.company_id) ?? []) dirty.add(id)
        return Latch.open(wake)
      })
    )
  ))

  let lastPrune = 0
  yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
    yield* refresh
    const now = yield* Clock.currentTimeMillis
    if (now - lastPrune >= pruneEveryMs) {
      lastPrune = now
      yield* repo.prune(new Date(now - retention))
    }
  }).pipe(
    Effect.catchCause((cause) => Effect.logWarning("webhook poll failed", cause)),
    Effect.andThen(Effect.sleep(config.webhookPollMs))
  )))
})).pipe(Layer.provide([DeliveryRepo.layer, OutboundHttp.layer]))

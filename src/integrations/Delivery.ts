import { Clock, Effect, Latch, Layer, Option, PubSub, Queue, Random, Result } from "effect"
import { randomUUID } from "node:crypto"
import { Events } from "../events/Events.ts"
import { AppConfig } from "../platform/Config.ts"
import { OutboundHttp } from "../platform/OutboundHttp.ts"
import { Credentials } from "../providers/Credentials.ts"
import { type AttemptResult, type Claim, type ClaimedDelivery, companyOf, DeliveryRepo } from "./DeliveryRepo.ts"
import type { Secrets } from "./Domain.ts"
import { backoffMillis, deliveryHeaders, envelope, webhookId } from "./Signing.ts"

/** Events read from the log per integration and round. */
const eventBatch = 1000
/** Deliveries claimed per round: this many per concurrency slot, so a batch is this many requests deep. */
const perSlot = 8
/** Outcomes written per transaction. */
const flushBatch = 500
const retention = 30 * 24 * 3600_000
const pruneEveryMs = 10 * 60_000

/**
 * Webhook delivery, a consumer of committed events. Deliveries are rows (`webhook_deliveries`) made
 * from the event log behind a per-integration cursor, so nothing lives only in memory: a restart, or
 * another runner, carries on from the table. The event bus only wakes the worker early; a poll finds
 * due retries and anything a wake-up missed.
 *
 * Each round claims, per integration, up to `concurrency × 8` due deliveries in one transaction with
 * the outbox step, and runs them at most `concurrency` at a time; while one runner holds unexpired
 * leases on an integration no other runner claims for it, so the cap holds across runners. A lease
 * (this runner's token, an expiry long enough for the whole batch plus WEBHOOK_LEASE_MARGIN_MS) is
 * taken before the request and the outcome is written only by its holder: once a 2xx is recorded the
 * delivery is never sent again. A runner that dies mid-batch leaves leases that expire, and those
 * attempts are made again (at least once; exactly once after a recorded success).
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
  const integrationCompany = new Map<number, number>()
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
    integrationCompany.clear()
    for (const i of active) {
      next.set(i.company_id, [...(next.get(i.company_id) ?? []), i.id])
      integrationCompany.set(i.id, i.company_id)
      if (i.work) dirty.add(i.id)
    }
    companies = next
    yield* Latch.open(wake)
  })

  const attempt = Effect.fnUntraced(function*(companyId: number, integrationId: number, claim: Claim, secrets: Secrets | null, d: ClaimedDelivery) {
    const id = webhookId(d.event_id)
    const body = envelope({ id, type: d.key, companyId, createdAt: d.created_at.toISOString(), dataJson: d.data })
    const started = yield* Clock.currentTimeMillis
    // Never sent unsigned: secrets that no longer decrypt (APP_KEY changed) fail the attempt until rotated.
    const sent = secrets === null
      ? Result.fail({ message: "The integration's secrets could not be decrypted; set them again (PATCH secrets)." })
      : yield* Effect.result(outbound.request({
        url: claim.settings.url,
        headers: deliveryHeaders(claim.settings, secrets, id, Math.floor(started / 1000), body),
        body,
        timeoutMs: claim.settings.timeoutSeconds * 1000,
        allowPrivate: config.webhookAllowPrivate
      }))
    const ended = yield* Clock.currentTimeMillis
    const statusCode = Result.isSuccess(sent) ? sent.success.status : null
    const ok = statusCode !== null && statusCode >= 200 && statusCode < 300
    const gone = statusCode === 410
    const number = d.attempts + 1
    const retry = !ok && !gone && claim.settings.retryEnabled && number < claim.settings.maxAttempts
    const wait = retry ? backoffMillis(number, yield* Random.next, config.webhookBackoffScale) : 0
    yield* Queue.offer(results, {
      deliveryId: d.id,
      leaseToken: token,
      companyId,
      integrationId,
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

  // Integrations with a batch in progress on this runner; a batch runs at most `concurrency` requests at once.
  const busy = new Set<number>()

  const pumpOne = Effect.fnUntraced(function*(integrationId: number) {
    const companyId = integrationCompany.get(integrationId)
    if (companyId === undefined || busy.has(integrationId)) return
    const claim = yield* repo.claim(companyOf(companyId), integrationId, {
      now: new Date(yield* Clock.currentTimeMillis),
      eventBatch,
      perSlot,
      leaseMarginMs: config.webhookLeaseMarginMs,
      token
    })
    if (claim === null) return
    if (claim.scanned === eventBatch) dirty.add(integrationId)
    if (claim.deliveries.length === 0) return
    const secrets = Option.getOrNull(credentials.decrypt(companyId, claim.secrets)) as Secrets | null
    busy.add(integrationId)
    yield* Effect.forEach(
      claim.deliveries,
      (d) => attempt(companyId, integrationId, claim, secrets, d).pipe(Effect.catchCause((cause) => Effect.logWarning("webhook attempt failed", cause))),
      { concurrency: claim.settings.concurrency, discard: true }
    ).pipe(
      Effect.ensuring(Effect.suspend(() => {
        busy.delete(integrationId)
        dirty.add(integrationId)
        return Latch.open(wake)
      })),
      Effect.forkIn(scope)
    )
  })

  // One round at a time: the latch is closed before the dirty set is read, so a wake-up during a
  // round opens it again for the next.
  yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
    yield* Latch.await(wake)
    yield* Latch.close(wake)
    const round = [...dirty]
    dirty.clear()
    yield* Effect.forEach(round, (id) =>
      pumpOne(id).pipe(Effect.catchCause((cause) => Effect.logWarning("webhook delivery round failed", cause))), {
      concurrency: 4,
      discard: true
    })
  })))

  // Outcomes are written in batches; each frees its integration's slots for the next round.
  yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
    const done = yield* Queue.takeBetween(results, 1, flushBatch)
    yield* repo.record(done, new Date(yield* Clock.currentTimeMillis))
    for (const r of done) dirty.add(r.integrationId)
    yield* Latch.open(wake)
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

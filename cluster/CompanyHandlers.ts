import { Clock, Effect, Layer } from "effect"
import { Entity } from "effect/cluster"
import { SqlClient } from "effect/sql"
import { type Decision, LeasedLogs, SlidingLogs } from "../src/platform/SlidingWindow.ts"
import type { LoggedRule } from "../src/platform/RateLimiter.ts"
import { Company, Throttle } from "./Company.ts"

const consumeWith = (logs: SlidingLogs) =>
({ payload }: { readonly payload: { readonly bucket: string; readonly limit: number; readonly windowMs: number } }) =>
  Effect.map(Clock.currentTimeMillis, (now) => logs.consume(payload.bucket, now, payload.limit, payload.windowMs))

/** Lease, Release and Pause over one set of leased logs (the token buckets), for either entity. */
const leasesWith = (logs: LeasedLogs) => ({
  Lease: ({ payload }: {
    readonly payload: {
      readonly bucket: string
      readonly limit: number
      readonly windowMs: number
      readonly holdMs: number
      readonly want: number
    }
  }) =>
    Effect.map(
      Clock.currentTimeMillis,
      (now) => logs.lease(payload.bucket, now, payload.limit, payload.windowMs, payload.holdMs, payload.want)
    ),
  Release: ({ payload }: {
    readonly payload: { readonly bucket: string; readonly lease: number; readonly units: number; readonly spentWithinMs: number }
  }) => Effect.sync(() => logs.release(payload.bucket, payload.lease, payload.units, payload.spentWithinMs)),
  Pause: ({ payload }: { readonly payload: { readonly bucket: string; readonly forMs: number } }) =>
    Effect.map(Clock.currentTimeMillis, (now) => logs.pause(payload.bucket, now + Math.max(0, payload.forMs)))
})

export interface LoggedHit {
  readonly subject: string
  readonly at: number
}

/**
 * The sliding-window decision over a log's hits (oldest first) for every rule at once: a hit is
 * allowed only when each rule has room; a refusal waits for the slowest full rule to free a slot.
 */
export const decideLogged = (
  hits: ReadonlyArray<LoggedHit>,
  subject: string,
  rules: ReadonlyArray<LoggedRule>,
  now: number
): Decision => {
  let remaining = Number.POSITIVE_INFINITY
  let retryAfterMs = 0
  for (const rule of rules) {
    const from = now - rule.windowMs
    const inWindow = hits.filter((hit) => hit.at > from && (rule.scope === "company" || hit.subject === subject))
    if (rule.limit <= 0) {
      retryAfterMs = Math.max(retryAfterMs, rule.windowMs)
    } else if (inWindow.length >= rule.limit) {
      const oldest = inWindow[inWindow.length - rule.limit]
      retryAfterMs = Math.max(retryAfterMs, Math.max(1, oldest.at + rule.windowMs - now))
    } else {
      remaining = Math.min(remaining, rule.limit - inWindow.length - 1)
    }
  }
  if (retryAfterMs > 0) return { allowed: false, remaining: 0, retryAfterMs }
  return { allowed: true, remaining: Number.isFinite(remaining) ? remaining : 0, retryAfterMs: 0 }
}

export const CompanyLayer = Company.toLayer(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const companyId = Number((yield* Entity.CurrentAddress).entityId)
    const buckets = new SlidingLogs()
    // Durable logs are read from their table the first time this entity instance uses them (after
    // a restart or a move to another runner); from then on the entity's own writes keep them current.
    const loaded = new Map<string, Array<LoggedHit>>()

    const hitsOf = Effect.fnUntraced(function*(log: string, horizonMs: number, now: number) {
      const known = loaded.get(log)
      if (known !== undefined) return known
      const cutoff = new Date(now - horizonMs)
      yield* sql`DELETE FROM company_throttle_log WHERE company_id = ${companyId} AND log = ${log} AND at <= ${cutoff}`
      const rows = yield* sql<{ readonly subject: string; readonly at: Date }>`
        SELECT subject, at FROM company_throttle_log
        WHERE company_id = ${companyId} AND log = ${log} AND at > ${cutoff} ORDER BY at, id`
      const hits = rows.map((row) => ({ subject: row.subject, at: row.at.getTime() }))
      loaded.set(log, hits)
      return hits
    })

    return Company.of({
      Consume: consumeWith(buckets),
      ...leasesWith(new LeasedLogs()),
      ConsumeLogged: ({ payload }) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const horizonMs = Math.max(0, ...payload.rules.map((rule) => rule.windowMs))
          const hits = yield* hitsOf(payload.log, horizonMs, now)
          while (hits.length > 0 && hits[0].at <= now - horizonMs) hits.shift()
          const decision = decideLogged(hits, payload.subject, payload.rules, now)
          if (decision.allowed) {
            // Rows past the longest window are dropped as new ones arrive, so a busy entity that never
            // reloads its log still keeps the table at one window's worth.
            yield* sql`
              WITH expired AS (
                DELETE FROM company_throttle_log
                WHERE company_id = ${companyId} AND log = ${payload.log} AND at <= ${new Date(now - horizonMs)}
              )
              INSERT INTO company_throttle_log (company_id, log, subject, at)
              VALUES (${companyId}, ${payload.log}, ${payload.subject}, ${new Date(now)})`
            hits.push({ subject: payload.subject, at: now })
          }
          return decision
        }).pipe(Effect.orDie)
    })
  }),
  // A defect (a statement the database rejects, a lost connection) fails only the hit it happened in: the entity
  // keeps serving the company's rate limits instead of restarting and replaying that hit ahead of all others.
  { maxIdleTime: "15 minutes", disableFatalDefects: true }
)

export const ThrottleLayer = Throttle.toLayer(
  Effect.sync(() => Throttle.of({ Consume: consumeWith(new SlidingLogs()), ...leasesWith(new LeasedLogs()) })),
  { maxIdleTime: "20 minutes", disableFatalDefects: true }
)

export const CompanyEntities = Layer.mergeAll(CompanyLayer, ThrottleLayer)

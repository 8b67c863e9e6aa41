import { Context, Effect, Layer, Predicate, Schedule } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import { createHash } from "node:crypto"
import { AppConfig } from "./Config.ts"
import { Conflict, ruleViolation } from "./Errors.ts"

/** Who asked what: a key is scoped to one user and one endpoint. */
export interface IdempotencyScope {
  readonly userId: number
  readonly endpoint: string
  readonly key: string
}

export type Recorded =
  | { readonly _tag: "None" }
  | { readonly _tag: "Replay"; readonly status: number; readonly body: unknown }
  | { readonly _tag: "Mismatch" }
  /**
   * The first request holds the key and has not answered yet; `ref` is what it recorded when claiming.
   * `abandoned`: it has held it longer than any live request can (deadline plus lease), so its process died.
   */
  | { readonly _tag: "InFlight"; readonly ref: unknown; readonly abandoned: boolean }

const ttl = "24 hours"

const canonical = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(canonical)
  if (Predicate.isObject(value)) {
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[key]
      if (v !== undefined) out[key] = canonical(v)
    }
    return out
  }
  return value
}

/** sha256 of the canonical JSON (keys sorted, undefined dropped), so key order does not count as a different body. */
export const requestHash = (body: unknown): string =>
  createHash("sha256").update(JSON.stringify(canonical(body) ?? null)).digest("hex")

export const keyMismatchCode = "idempotency_key_mismatch"
export const keyMismatchMessage = "This idempotency key was already used with a different request body."
export const keyInFlightMessage = "A request with this idempotency key is still being processed."

export const keyMismatch = () => ruleViolation(keyMismatchCode, keyMismatchMessage)

export const keyInFlight = () => new Conflict({ message: keyInFlightMessage })

export const outcomeUnknownReason = "outcome_unknown"
export const outcomeUnknownMessage =
  "The first request with this idempotency key was cut off before its outcome was known; it may or may not have taken effect."

/** A key settled as `outcome_unknown` is recorded as this answer (and replayed as it until someone settles it otherwise). */
export const outcomeUnknownStatus = 409

/** Where a key stands, as an operator who settles it sees it. */
export interface KeyState {
  readonly scope: IdempotencyScope
  readonly ref: unknown
  /** `pending`: a live request holds it; `abandoned`: its process died; `outcome_unknown`; `done`: it has its answer. */
  readonly state: "pending" | "abandoned" | "outcome_unknown" | "done"
}

/** An abandoned key that has an identifier on record: what the process that settles it needs. */
export interface Abandoned {
  readonly companyId: number
  readonly scope: IdempotencyScope
  readonly ref: unknown
}
/**
 * Replays of creating requests (`idempotency_keys`). A key is written only together with what it
 * creates, in the same statement (`claiming`), so a refused or invalid request never burns it.
 * Rows live 24 hours; older ones count as absent and are swept.
 */
export class Idempotency extends Context.Service<Idempotency, {
  lookup(scope: IdempotencyScope, hash: string): Effect.Effect<Recorded>
  /**
   * The claim as a companion write of the statement that creates what the key answers: `writes` is
   * a CTE named `key_claim`, `passed` the condition that it took the key (false when a live row
   * for the scope already exists), to make the creating write conditional on. `ref` is a jsonb
   * SQL expression, e.g. built from the id the statement allocates.
   */
  claiming(companyId: number, scope: IdempotencyScope, hash: string, ref: Statement.Fragment): {
    readonly writes: Statement.Fragment
    readonly passed: Statement.Fragment
  }
  complete(scope: IdempotencyScope, status: number, body: unknown): Effect.Effect<void>
  /** `complete` as a companion write (a CTE named `key_done`) for a statement that also writes what the key answers. */
  completion(scope: IdempotencyScope, status: number, body: unknown): Statement.Fragment
  /**
   * Settles an abandoned key whose effect cannot be known: it answers 409 `outcome_unknown` from now on
   * (the `ref` stays in the body). A no-op unless the key is still pending and abandoned.
   */
  outcomeUnknown(scope: IdempotencyScope): Effect.Effect<void>
  /**
   * Settles, as a companion write (a CTE named `key_settled`), every key of the company that points to `ref`
   * (its recorded body contains it) and has no outcome yet: abandoned, or `outcome_unknown`. A key a live
   * request still holds is left to that request.
   */
  settling(companyId: number, ref: Record<string, unknown>, status: number, body: unknown): Statement.Fragment
  /** The company's live keys with this value (one per user and endpoint that used it). */
  byKey(companyId: number, key: string): Effect.Effect<ReadonlyArray<KeyState>>
  /** Pending keys past the deadline plus the lease, oldest first: for the owner of what they point to to settle. */
  abandoned(limit: number): Effect.Effect<ReadonlyArray<Abandoned>>
  /** Deadline plus lease: a pending key older than this belongs to a process that died. */
  readonly abandonedAfterMs: number
}>()("crm/platform/Idempotency") {
  static readonly layer = Layer.effect(
    Idempotency,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const config = yield* AppConfig
      const abandonedAfterMs = config.requestDeadlineMs + config.idempotencyLeaseMs
      const abandonedAfter = `${abandonedAfterMs} milliseconds`

      const lookup = (scope: IdempotencyScope, hash: string) =>
        sql<{
          request_hash: string
          state: "pending" | "done"
          response_status: number | null
          response_body: unknown
          age_ms: number
        }>`
          SELECT request_hash, state, response_status, response_body,
                 (extract(epoch FROM now() - created_at) * 1000)::int8 AS age_ms
          FROM idempotency_keys
          WHERE user_id = ${scope.userId} AND endpoint = ${scope.endpoint} AND key = ${scope.key}
            AND created_at > now() - ${ttl}::interval`.pipe(
          Effect.map((rows): Recorded => {
            const row = rows[0]
            if (row === undefined) return { _tag: "None" }
            if (row.request_hash !== hash) return { _tag: "Mismatch" }
            if (row.state === "pending") {
              return { _tag: "InFlight", ref: row.response_body, abandoned: row.age_ms >= abandonedAfterMs }
            }
            return { _tag: "Replay", status: row.response_status ?? 200, body: row.response_body }
          }),
          Effect.orDie
        )

      const claiming = (companyId: number, scope: IdempotencyScope, hash: string, ref: Statement.Fragment) => ({
        writes: sql`key_claim AS (
          INSERT INTO idempotency_keys (company_id, user_id, endpoint, key, request_hash, state, response_body)
          VALUES (${companyId}, ${scope.userId}, ${scope.endpoint}, ${scope.key}, ${hash}, 'pending', ${ref})
          ON CONFLICT (user_id, endpoint, key) DO UPDATE SET
            company_id = EXCLUDED.company_id,
            request_hash = EXCLUDED.request_hash,
            state = 'pending',
            response_status = NULL,
            response_body = EXCLUDED.response_body,
            created_at = now()
          WHERE idempotency_keys.created_at <= now() - ${ttl}::interval
          RETURNING 1 AS claimed
        )`,
        passed: sql`EXISTS (SELECT 1 FROM key_claim)`
      })

      const completion = (scope: IdempotencyScope, status: number, body: unknown) =>
        sql`key_done AS (
          UPDATE idempotency_keys SET state = 'done', response_status = ${status}, response_body = ${JSON.stringify(body)}::jsonb
          WHERE user_id = ${scope.userId} AND endpoint = ${scope.endpoint} AND key = ${scope.key}
        )`

      const complete = (scope: IdempotencyScope, status: number, body: unknown) =>
        sql`WITH ${completion(scope, status, body)} SELECT 1`.pipe(Effect.asVoid, Effect.orDie)

      const outcomeUnknown = (scope: IdempotencyScope) =>
        sql`
          UPDATE idempotency_keys SET
            state = 'done',
            response_status = ${outcomeUnknownStatus},
            response_body = jsonb_build_object('message', ${outcomeUnknownMessage}::text, 'reason', ${outcomeUnknownReason}::text)
              || CASE WHEN jsonb_typeof(response_body) = 'object' THEN response_body ELSE '{}'::jsonb END
          WHERE user_id = ${scope.userId} AND endpoint = ${scope.endpoint} AND key = ${scope.key}
            AND state = 'pending' AND created_at <= now() - ${abandonedAfter}::interval`.pipe(Effect.asVoid, Effect.orDie)

      // Literal constants: the partial index of migration 0135 is chosen only for a predicate it can see.
      const unsettled = sql`(
        (state = 'pending' AND created_at <= now() - ${abandonedAfter}::interval)
        OR (state = 'done' AND response_status = 409 AND response_body->>'reason' = 'outcome_unknown')
      )`

      const settling = (companyId: number, ref: Record<string, unknown>, status: number, body: unknown) =>
        sql`key_settled AS (
          UPDATE idempotency_keys SET state = 'done', response_status = ${status}, response_body = ${JSON.stringify(body)}::jsonb
          WHERE company_id = ${companyId} AND response_body @> ${JSON.stringify(ref)}::jsonb
            AND created_at > now() - ${ttl}::interval AND ${unsettled}
        )`

      const byKey = (companyId: number, key: string) =>
        sql<{ user_id: number; endpoint: string; key: string; state: "pending" | "done"; response_status: number | null; response_body: unknown; abandoned: boolean }>`
          SELECT user_id, endpoint, key, state, response_status, response_body,
                 created_at <= now() - ${abandonedAfter}::interval AS abandoned
          FROM idempotency_keys
          WHERE company_id = ${companyId} AND key = ${key} AND created_at > now() - ${ttl}::interval
          ORDER BY created_at`.pipe(
          Effect.map((rows) =>
            rows.map((row): KeyState => {
              const body = row.response_body
              const unknown = row.state === "done" && row.response_status === outcomeUnknownStatus &&
                Predicate.isObject(body) && "reason" in body && body.reason === outcomeUnknownReason
              return {
                scope: { userId: Number(row.user_id), endpoint: row.endpoint, key: row.key },
                ref: body,
                state: row.state === "pending" ? (row.abandoned ? "abandoned" : "pending") : unknown ? "outcome_unknown" : "done"
              }
            })
          ),
          Effect.orDie
        )

      const abandoned = (limit: number) =>
        sql<{ company_id: number; user_id: number; endpoint: string; key: string; response_body: unknown }>`
          SELECT company_id, user_id, endpoint, key, response_body FROM idempotency_keys
          WHERE state = 'pending' AND created_at <= now() - ${abandonedAfter}::interval
            AND created_at > now() - ${ttl}::interval
          ORDER BY created_at LIMIT ${limit}`.pipe(
          Effect.map((rows) =>
            rows.map((row): Abandoned => ({
              companyId: Number(row.company_id),
              scope: { userId: Number(row.user_id), endpoint: row.endpoint, key: row.key },
              ref: row.response_body
            }))
          ),
          Effect.orDie
        )

      yield* Effect.forkScoped(
        sql`DELETE FROM idempotency_keys WHERE created_at <= now() - ${ttl}::interval`.pipe(
          Effect.catchCause((cause) => Effect.logWarning("idempotency sweep failed", cause)),
          Effect.delay("1 minute"),
          Effect.repeat(Schedule.spaced("15 minutes"))
        )
      )

      return Idempotency.of({ lookup, claiming, complete, completion, outcomeUnknown, settling, byKey, abandoned, abandonedAfterMs })
    })
  )
}

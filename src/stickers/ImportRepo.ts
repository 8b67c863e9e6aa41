import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"

/** One static sticker of the set, as planned at queue time. */
export interface ImportItem {
  readonly file_id: string
  readonly emoji: string | null
}

export interface NewImport {
  readonly channel_id: number
  readonly user_id: number | null
  readonly set_name: string
  readonly title: string
  readonly items: ReadonlyArray<ImportItem>
  readonly skipped_animated: number
  readonly truncated: boolean
}

export interface ImportJob {
  readonly id: number
  readonly company_id: number
  readonly channel_id: number
  readonly set_name: string
  readonly title: string
  readonly items: ReadonlyArray<ImportItem>
  readonly skipped_animated: number
  readonly truncated: boolean
  readonly pack_id: number | null
  readonly next_index: number
  readonly imported: number
  readonly failed: number
}

/** How one item ended: a sticker in `pack_id`, or a failure. */
export type ItemOutcome = { readonly imported: true; readonly packId: number } | { readonly imported: false }

/**
 * The durable queue of Telegram set imports. A runner works a job only while it holds
 * its lease (`lease_owner`, renewed with every item); every write checks the owner, so a
 * runner that lost its lease stops at its next step instead of racing the adopter.
 */
export class ImportRepo extends Context.Service<ImportRepo, {
  /** A new job, already leased to `owner` (the runner that accepted it starts it at once). */
  insert(companyId: number, job: NewImport, owner: string, leaseSeconds: number): Effect.Effect<number>
  find(companyId: number, id: number): Effect.Effect<Option.Option<ImportJob>>
  /**
   * Adoption, across companies (the one statement without a tenant: the worker serves them
   * all): the oldest job that is queued (released at shutdown) or whose lease ran out.
   */
  claimNext(owner: string, leaseSeconds: number): Effect.Effect<Option.Option<{ readonly id: number; readonly company_id: number }>>
  /** Records one item and renews the lease; false when the lease is no longer ours. */
  advance(companyId: number, id: number, owner: string, index: number, outcome: ItemOutcome, leaseSeconds: number): Effect.Effect<boolean>
  /** False when the lease is no longer ours. */
  finish(companyId: number, id: number, owner: string, outcome: "success" | "error", error: string | null): Effect.Effect<boolean>
  /** Hands the job back to the queue (shutdown), for any runner to adopt at once. */
  release(companyId: number, id: number, owner: string): Effect.Effect<void>
}>()("crm/stickers/ImportRepo") {
  static readonly layer = Layer.effect(
    ImportRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const lease = (seconds: number) => sql`now() + make_interval(secs => ${seconds})`

      const insert = (companyId: number, job: NewImport, owner: string, leaseSeconds: number) =>
        sql<{ id: number }>`
          INSERT INTO sticker_imports (company_id, channel_id, user_id, set_name, title, items, skipped_animated, truncated,
            status, lease_owner, lease_until)
          VALUES (${companyId}, ${job.channel_id}, ${job.user_id}, ${job.set_name}, ${job.title}, ${JSON.stringify(job.items)}::jsonb,
            ${job.skipped_animated}, ${job.truncated}, 'running', ${owner}, ${lease(leaseSeconds)})
          RETURNING id`.pipe(
          Effect.map((rows) => rows[0].id),
          Effect.orDie
        )

      const find = (companyId: number, id: number) =>
        sql<ImportJob>`
          SELECT id, company_id, channel_id, set_name, title, items, skipped_animated, truncated, pack_id, next_index, imported, failed
          FROM sticker_imports WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const claimNext = (owner: string, leaseSeconds: number) =>
        sql<{ id: number; company_id: number }>`
          UPDATE sticker_imports SET status = 'running', lease_owner = ${owner}, lease_until = ${lease(leaseSeconds)}, updated_at = now()
          WHERE id = (
            SELECT id FROM sticker_imports
            WHERE status <> 'finished' AND (status = 'queued' OR lease_until IS NULL OR lease_until < now())
            ORDER BY id
            LIMIT 1
            FOR UPDATE SKIP LOCKED)
          RETURNING id, company_id`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const advance = (companyId: number, id: number, owner: string, index: number, outcome: ItemOutcome, leaseSeconds: number) =>
        sql<{ id: number }>`
          UPDATE sticker_imports SET
            next_index = ${index + 1},
            imported = imported + ${outcome.imported ? 1 : 0},
            failed = failed + ${outcome.imported ? 0 : 1},
            pack_id = COALESCE(pack_id, ${outcome.imported ? outcome.packId : null}),
            lease_until = ${lease(leaseSeconds)},
            updated_at = now()
          WHERE company_id = ${companyId} AND id = ${id} AND lease_owner = ${owner} AND status = 'running'
          RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const finish = (companyId: number, id: number, owner: string, outcome: "success" | "error", error: string | null) =>
        sql<{ id: number }>`
          UPDATE sticker_imports SET status = 'finished', outcome = ${outcome}, error = ${error},
            lease_owner = NULL, lease_until = NULL, finished_at = now(), updated_at = now()
          WHERE company_id = ${companyId} AND id = ${id} AND lease_owner = ${owner} AND status = 'running'
          RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const release = (companyId: number, id: number, owner: string) =>
        sql`
          UPDATE sticker_imports SET status = 'queued', lease_owner = NULL, lease_until = NULL, updated_at = now()
          WHERE company_id = ${companyId} AND id = ${id} AND lease_owner = ${owner} AND status = 'running'`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      return ImportRepo.of({ insert, find, claimNext, advance, finish, release })
    })
  )
}

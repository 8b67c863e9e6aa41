import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import type { Integration, IntegrationStatus, LogEntry, SecretName, WebhookSettings } from "./Domain.ts"

export interface IntegrationRow {
  readonly id: number
  readonly company_id: number
  readonly type: "webhook"
  readonly name: string
  readonly status: IntegrationStatus
  readonly settings: WebhookSettings
  readonly secrets: Uint8Array
  readonly secret_names: ReadonlyArray<string>
  readonly credential_created_at: Date
  readonly credential_updated_at: Date
  readonly rotated_at: Date | null
  readonly last_success_at: Date | null
  readonly last_failure_at: Date | null
  readonly last_error: string | null
  readonly consecutive_failures: number
  readonly created_at: Date
  readonly updated_at: Date
}

const iso = (d: Date | null) => (d === null ? null : d.toISOString())

export const toIntegration = (row: IntegrationRow): Integration => ({
  id: row.id,
  company_id: row.company_id,
  type: row.type,
  name: row.name,
  status: row.status,
  health: {
    last_success_at: iso(row.last_success_at),
    last_failure_at: iso(row.last_failure_at),
    last_error: row.last_error,
    consecutive_failures: row.consecutive_failures
  },
  settings: row.settings,
  credential: {
    secrets: {
      signingSecret: row.secret_names.includes("signingSecret"),
      bearerToken: row.secret_names.includes("bearerToken"),
      basicUsername: row.secret_names.includes("basicUsername"),
      basicPassword: row.secret_names.includes("basicPassword")
    },
    expires_at: null,
    last_refreshed_at: null,
    rotated_at: iso(row.rotated_at),
    created_at: row.credential_created_at.toISOString(),
    updated_at: row.credential_updated_at.toISOString()
  },
  external_entities: [],
  mappings: [],
  funnel_mappings: [],
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString()
})

interface LogRow {
  readonly id: number
  readonly level: "info" | "error"
  readonly code: string
  readonly message: string
  readonly context: LogEntry["context"]
  readonly created_at: Date
}

export interface NewIntegration {
  readonly name: string
  readonly status: IntegrationStatus
  readonly settings: WebhookSettings
  readonly secrets: Uint8Array
  readonly secretNames: ReadonlyArray<SecretName>
  readonly now: Date
}

export interface IntegrationPatch {
  readonly name: string
  readonly status: IntegrationStatus
  readonly settings: WebhookSettings
  /** Present when secrets were given (a rotation). */
  readonly secrets?: { readonly bytes: Uint8Array; readonly names: ReadonlyArray<SecretName> }
  readonly now: Date
}

/** Integrations of one company; every statement carries the company id. */
export class IntegrationsRepo extends Context.Service<IntegrationsRepo, {
  list(companyId: CompanyId, filter: { readonly type?: string; readonly status?: string }): Effect.Effect<ReadonlyArray<IntegrationRow>>
  find(companyId: CompanyId, id: number): Effect.Effect<Option.Option<IntegrationRow>>
  /** Locked for the rest of the caller's transaction. */
  findForUpdate(companyId: CompanyId, id: number): Effect.Effect<Option.Option<IntegrationRow>>
  /** Deliveries start with the company's next event: the cursor is its current sequence number. */
  insert(companyId: CompanyId, integration: NewIntegration): Effect.Effect<IntegrationRow>
  update(companyId: CompanyId, id: number, patch: IntegrationPatch, reenabled: boolean): Effect.Effect<IntegrationRow>
  delete(companyId: CompanyId, id: number): Effect.Effect<boolean>
  logs(companyId: CompanyId, id: number, limit: number): Effect.Effect<ReadonlyArray<LogEntry>>
  summary(companyId: CompanyId): Effect.Effect<ReadonlyArray<{ readonly type: string; readonly count: number }>>
  /** The ids among `ids` that are channels of the company. */
  ownChannels(companyId: CompanyId, ids: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<number>>
}>()("crm/integrations/IntegrationsRepo") {
  static readonly layer = Layer.effect(
    IntegrationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, company_id, type, name, status, settings, secrets, secret_names, credential_created_at,
        credential_updated_at, rotated_at, last_success_at, last_failure_at, last_error, consecutive_failures, created_at, updated_at`

      const list = (companyId: CompanyId, filter: { readonly type?: string; readonly status?: string }) =>
        sql<IntegrationRow>`
          SELECT ${columns} FROM integrations WHERE company_id = ${companyId}
          ${filter.type === undefined ? sql`` : sql`AND type = ${filter.type}`}
          ${filter.status === undefined ? sql`` : sql`AND status = ${filter.status}`}
          ORDER BY id`.pipe(Effect.orDie)

      const find = (companyId: CompanyId, id: number) =>
        sql<IntegrationRow>`SELECT ${columns} FROM integrations WHERE company_id = ${companyId} AND id = ${id}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const findForUpdate = (companyId: CompanyId, id: number) =>
        sql<IntegrationRow>`SELECT ${columns} FROM integrations WHERE company_id = ${companyId} AND id = ${id} FOR UPDATE`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const insert = (companyId: CompanyId, i: NewIntegration) =>
        sql<IntegrationRow>`
          INSERT INTO integrations (company_id, type, name, status, settings, secrets, secret_names, credential_created_at,
            credential_updated_at, cursor_seq, created_at, updated_at)
          SELECT ${companyId}, 'webhook', ${i.name}, ${i.status}, ${JSON.stringify(i.settings)}::jsonb, ${Buffer.from(i.secrets)},
            ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(i.secretNames)}::jsonb)), ${i.now.toISOString()}::timestamptz,
            ${i.now.toISOString()}::timestamptz, c.event_seq, ${i.now.toISOString()}::timestamptz, ${i.now.toISOString()}::timestamptz
          FROM companies c WHERE c.id = ${companyId}
          RETURNING ${columns}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const update = (companyId: CompanyId, id: number, p: IntegrationPatch, reenabled: boolean) => {
        const now = p.now.toISOString()
        const secrets = p.secrets === undefined
          ? sql``
          : sql`, secrets = ${Buffer.from(p.secrets.bytes)},
              secret_names = ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(p.secrets.names)}::jsonb)),
              rotated_at = ${now}::timestamptz, credential_updated_at = ${now}::timestamptz`
        // Re-enabled by hand: the failure streak starts over and the backlog is due now.
        const reset = reenabled ? sql`, consecutive_failures = 0, failing_since = NULL` : sql``
        return Effect.gen(function*() {
          if (reenabled) {
            yield* sql`
              UPDATE webhook_deliveries SET next_attempt_at = LEAST(next_attempt_at, ${now}::timestamptz)
              WHERE integration_id = ${id} AND company_id = ${companyId} AND state = 'pending' AND lease_token IS NULL`
          }
          const rows = yield* sql<IntegrationRow>`
            UPDATE integrations SET name = ${p.name}, status = ${p.status}, settings = ${JSON.stringify(p.settings)}::jsonb,
              updated_at = ${now}::timestamptz ${secrets} ${reset}
            WHERE company_id = ${companyId} AND id = ${id} RETURNING ${columns}`
          return rows[0]
        }).pipe(Effect.orDie)
      }

      const remove = (companyId: CompanyId, id: number) =>
        sql<{ id: number }>`DELETE FROM integrations WHERE company_id = ${companyId} AND id = ${id} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const logs = (companyId: CompanyId, id: number, limit: number) =>
        sql<LogRow>`
          SELECT id, level, code, message, context, created_at FROM integration_logs
          WHERE company_id = ${companyId} AND integration_id = ${id} ORDER BY id DESC LIMIT ${limit}`.pipe(
          Effect.map((rows) =>
            rows.map((row): LogEntry => ({
              id: row.id,
              level: row.level,
              code: row.code,
              message: row.message,
              context: row.context,
              created_at: row.created_at.toISOString()
            }))
          ),
          Effect.orDie
        )

      const summary = (companyId: CompanyId) =>
        sql<{ type: string; count: number }>`
          SELECT type, count(*)::int AS count FROM integrations WHERE company_id = ${companyId} GROUP BY type`.pipe(Effect.orDie)

      const ownChannels = (companyId: CompanyId, ids: ReadonlyArray<number>) =>
        ids.length === 0 ? Effect.succeed([]) : sql<{ id: number }>`
          SELECT id FROM channels WHERE company_id = ${companyId} AND deleted_at IS NULL
          AND id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb)::bigint)`.pipe(
          Effect.map((rows) => rows.map((row) => Number(row.id))),
          Effect.orDie
        )

      return IntegrationsRepo.of({ list, find, findForUpdate, insert, update, delete: remove, logs, summary, ownChannels })
    })
  )
}

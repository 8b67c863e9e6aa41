import type { CompanyId } from "../auth/Domain.ts"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { VisibleChannels } from "../auth/ChannelAccess.ts"
import type { ChannelStatus } from "./Domain.ts"
import type { ChannelType, ProviderKind } from "../providers/Domain.ts"

export interface ChannelRow {
  readonly id: number
  readonly company_id: CompanyId
  readonly type: ChannelType
  readonly provider: ProviderKind
  readonly name: string
  readonly account_name: string | null
  readonly status: ChannelStatus
  readonly credentials: Uint8Array | null
  readonly webhook_secret: string
  readonly settings: Record<string, unknown>
  readonly created_at: Date
  readonly updated_at: Date
}

export interface NewChannel {
  readonly type: ChannelType
  readonly provider: ProviderKind
  readonly name: string
  readonly account_name: string | null
  readonly credentials: Uint8Array | null
  readonly webhook_secret: string
  readonly settings: Record<string, unknown>
}

export interface ChannelPatch {
  readonly name?: string | undefined
  /** `null` clears it; absent keeps it. */
  readonly account_name?: string | null | undefined
  readonly status?: ChannelStatus | undefined
  readonly credentials?: Uint8Array | undefined
  /** Merged key by key into the stored settings. */
  readonly settings?: Record<string, unknown> | undefined
}

export class ChannelsRepo extends Context.Service<ChannelsRepo, {
  list(companyId: CompanyId, visible: VisibleChannels): Effect.Effect<ReadonlyArray<ChannelRow>>
  find(companyId: CompanyId, id: number): Effect.Effect<Option.Option<ChannelRow>>
  insert(companyId: CompanyId, channel: NewChannel): Effect.Effect<ChannelRow>
  update(companyId: CompanyId, id: number, patch: ChannelPatch): Effect.Effect<Option.Option<ChannelRow>>
  softDelete(companyId: CompanyId, id: number): Effect.Effect<boolean>
  /**
   * Inbound webhooks: the URL names only the channel (the provider knows nothing of
   * tenants), so this is the one lookup by id alone; the row carries its company.
   */
  findForHook(id: number, provider: ProviderKind): Effect.Effect<Option.Option<ChannelRow>>
}>()("crm/channels/ChannelsRepo") {
  static readonly layer = Layer.effect(
    ChannelsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, company_id, type, provider, name, account_name, status, credentials, webhook_secret, settings,
        created_at, updated_at`

      const list = (companyId: CompanyId, visible: VisibleChannels) => {
        if (visible !== "all" && visible.size === 0) return Effect.succeed([])
        const only = visible === "all" ? sql`` : sql`AND id IN ${sql.in([...visible])}`
        return sql<ChannelRow>`
          SELECT ${columns} FROM channels
          WHERE company_id = ${companyId} AND deleted_at IS NULL ${only}
          ORDER BY id`.pipe(Effect.orDie)
      }

      const find = (companyId: CompanyId, id: number) =>
        sql<ChannelRow>`
          SELECT ${columns} FROM channels
          WHERE company_id = ${companyId} AND id = ${id} AND deleted_at IS NULL`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const insert = (companyId: CompanyId, c: NewChannel) =>
        sql<ChannelRow>`
          INSERT INTO channels (company_id, type, provider, name, account_name, credentials, webhook_secret, settings)
          VALUES (${companyId}, ${c.type}, ${c.provider}, ${c.name}, ${c.account_name},
            ${c.credentials === null ? null : Buffer.from(c.credentials)}, ${c.webhook_secret}, ${JSON.stringify(c.settings)}::jsonb)
          RETURNING ${columns}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const update = (companyId: CompanyId, id: number, patch: ChannelPatch) =>
        sql<ChannelRow>`
          UPDATE channels SET
            name = COALESCE(${patch.name ?? null}, name),
            account_name = CASE WHEN ${patch.account_name !== undefined} THEN ${patch.account_name ?? null} ELSE account_name END,
            status = COALESCE(${patch.status ?? null}, status),
            credentials = COALESCE(${patch.credentials === undefined ? null : Buffer.from(patch.credentials)}, credentials),
            settings = settings || ${JSON.stringify(patch.settings ?? {})}::jsonb,
            updated_at = now()
          WHERE company_id = ${companyId} AND id = ${id} AND deleted_at IS NULL
          RETURNING ${columns}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const softDelete = (companyId: CompanyId, id: number) =>
        sql<{ readonly id: number }>`
          UPDATE channels SET deleted_at = now(), updated_at = now()
          WHERE company_id = ${companyId} AND id = ${id} AND deleted_at IS NULL
          RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const findForHook = (id: number, provider: ProviderKind) =>
        sql<ChannelRow>`
          SELECT ${columns} FROM channels
          WHERE id = ${id} AND provider = ${provider} AND deleted_at IS NULL`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      return ChannelsRepo.of({ list, find, insert, update, softDelete, findForHook })
    })
  )
}

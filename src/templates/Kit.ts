import { Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { notFound } from "../platform/Errors.ts"
import { Credentials } from "../providers/Credentials.ts"
import { channelContext } from "../providers/Rules.ts"
import { toTemplate, shown } from "./Render.ts"
import { type BusinessChannel, type InstanceRow, TemplatesRepo } from "./Repo.ts"

export const templateNotFound = () => notFound("Template not found.")

/** A template event as recorded: its row and its system event. */
export interface TemplateEventInput {
  readonly templateId?: number | null
  readonly channelId?: number | null
  readonly metaStatus?: string | null
  readonly reason?: string | null
  readonly metadata?: Record<string, unknown>
  readonly actorUserId: number | null
}

/** What both template services read and write through: loading, rendering, recording events, channel contexts. */
export const makeTemplateKit = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const repo = yield* TemplatesRepo
  const events = yield* Events
  const credentials = yield* Credentials

  const contextOf = (companyId: CompanyId, c: {
    readonly id: number
    readonly type: BusinessChannel["type"]
    readonly provider: BusinessChannel["provider"]
    readonly status: BusinessChannel["status"]
    readonly credentials: Uint8Array | null
    readonly settings: Record<string, unknown>
  }) => channelContext(credentials, companyId, c)

  const instanceContext = (companyId: CompanyId, row: InstanceRow) =>
    row.channel_id === null || row.channel_type === null || row.provider === null || row.channel_status === null
      ? null
      : contextOf(companyId, {
        id: row.channel_id,
        type: row.channel_type,
        provider: row.provider,
        status: row.channel_status,
        credentials: row.credentials,
        settings: row.settings ?? {}
      })

  /** A template event row and its system event, in the caller's transaction. */
  const record = Effect.fnUntraced(function*(companyId: CompanyId, groupId: number, type: string, e: TemplateEventInput) {
    const event = {
      groupId,
      type,
      templateId: e.templateId ?? null,
      channelId: e.channelId ?? null,
      metaStatus: e.metaStatus ?? null,
      reason: e.reason ?? null,
      metadata: e.metadata ?? {},
      actorUserId: e.actorUserId
    }
    yield* repo.insertEvent(companyId, event)
    yield* events.emit(companyId, `template.${type}`, {
      template_group_id: groupId,
      template_id: event.templateId,
      channel_id: event.channelId,
      type,
      meta_status: event.metaStatus,
      reason: event.reason,
      metadata: event.metadata,
      actor_id: event.actorUserId
    })
  })

  const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) => sql.withTransaction(effect).pipe(Effect.catchTag("SqlError", Effect.die))

  /** The group an id names (group or instance id) with every instance; 404 for another company's. */
  const load = Effect.fnUntraced(function*(companyId: CompanyId, id: number) {
    const found = yield* repo.resolve(companyId, id)
    if (Option.isNone(found)) return yield* templateNotFound()
    const all = yield* repo.instances(companyId, [found.value.group.id])
    return { group: found.value.group, instanceId: found.value.instanceId, all }
  })

  const render = Effect.fnUntraced(function*(companyId: CompanyId, groupId: number, instanceId: number | null) {
    const [group] = yield* repo.groups(companyId, [groupId])
    const all = yield* repo.instances(companyId, [groupId])
    const uses = yield* repo.usesCounts(companyId, all.map((r) => r.id))
    return toTemplate(group, shown(instanceId, all), all, uses)
  })

  return { repo, events, contextOf, instanceContext, record, transaction, load, render }
})

export type TemplateKit = Effect.Success<typeof makeTemplateKit>

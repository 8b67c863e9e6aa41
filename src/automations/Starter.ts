import { Context, type Effect, Schema } from "effect"

/** A trigger that matched: what starting a run needs. `context` is the unmasked trigger data the steps read. */
export const StartRequest = Schema.Struct({
  companyId: Schema.Int,
  automationId: Schema.String,
  versionId: Schema.String,
  event: Schema.String,
  eventId: Schema.NullOr(Schema.Int),
  contactId: Schema.NullOr(Schema.Int),
  context: Schema.Record(Schema.String, Schema.Unknown)
})
export type StartRequest = typeof StartRequest.Type

/** The port: starts a run in the order of its automation, wherever in the cluster the automation lives. */
export class AutomationStarter extends Context.Service<AutomationStarter, {
  start(request: StartRequest): Effect.Effect<void>
}>()("crm/automations/AutomationStarter") {}

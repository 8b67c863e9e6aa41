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

/**
 * A run that was admitted: its first segment runs at once in process, `jobId` being its durable fallback.
 * `actor` and `timezone` are read by the admission, so that the first segment needs no read of its run.
 */
export const Started = Schema.Struct({
  runId: Schema.String,
  jobId: Schema.Int,
  enqueuedAt: Schema.Number,
  actor: Schema.NullOr(Schema.Struct({
    userId: Schema.Int,
    plan: Schema.String,
    timezone: Schema.String,
    email: Schema.NullOr(Schema.String),
    name: Schema.String
  })),
  timezone: Schema.String
})
export type Started = typeof Started.Type

/** The port: starts a run in the order of its automation, wherever in the cluster the automation lives. */
export class AutomationStarter extends Context.Service<AutomationStarter, {
  /** Null when no run was admitted: the event already started one, or the loop guard skipped it. */
  start(request: StartRequest): Effect.Effect<Started | null>
}>()("crm/automations/AutomationStarter") {}

import { Schema } from "effect"

/** The envelope every consumer sees: replay, realtime and (later) webhooks. */
export const EventEnvelope = Schema.Struct({
  seq: Schema.Int,
  event: Schema.String,
  company_id: Schema.Int,
  occurred_at: Schema.String,
  data: Schema.Unknown
})
export type EventEnvelope = typeof EventEnvelope.Type

export const CatalogEntry = Schema.Struct({
  key: Schema.String,
  name: Schema.String,
  group: Schema.String,
  type: Schema.String,
  description: Schema.String
})
export type CatalogEntry = typeof CatalogEntry.Type

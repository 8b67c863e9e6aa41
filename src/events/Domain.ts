import { Schema } from "effect"

/**
 * The one envelope of an event, the same bytes of meaning on a webhook, a realtime message and the
 * replay: `id` (`evt_<events row id>`, the webhook's `webhook-id`), the company's `seq`, the key as `event`.
 */
export const EventEnvelope = Schema.Struct({
  id: Schema.String,
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

import { Effect, Layer, Predicate, PubSub } from "effect"
import { SqlClient } from "effect/sql"
import type { EventEnvelope } from "../events/Domain.ts"
import { Events } from "../events/Events.ts"

/** Whole-message stop words, lower case: English and the local languages of our tenants. */
export const stopWords: ReadonlySet<string> = new Set([
  "stop", "unsubscribe", "opt out", "optout", "opt-out",
  "стоп", "отписаться", "отписка", "тоқта", "тоқтату",
  "stopp", "abmelden", "arret", "arrêt", "désabonner", "desabonner", "baja", "parar"
])

/** An inbound text that is a stop word alone (surrounding spaces and punctuation aside). */
export const isStopWord = (text: string) => stopWords.has(text.trim().toLowerCase().replace(/^[\s\p{P}]+|[\s\p{P}]+$/gu, ""))

const inboundText = (event: EventEnvelope) => {
  if (event.event !== "message.created" || !Predicate.isObject(event.data)) return null
  const message = (event.data as { readonly message?: unknown }).message
  if (!Predicate.isObject(message)) return null
  const m = message as { readonly direction?: unknown; readonly message_content?: unknown; readonly conversation_id?: unknown }
  if (m.direction !== "inbound" || !Predicate.isString(m.message_content) || !Predicate.isNumber(m.conversation_id)) return null
  return { text: m.message_content, conversationId: m.conversation_id }
}

/**
 * Spec rule 1 of broadcasts: an inbound stop-word message opts its contact out. Every process
 * sees every committed event; the conditional update lets one of them record it and emit the event.
 */
export const StopWordsLayer = Layer.effectDiscard(Effect.gen(function*() {
  const events = yield* Events
  const sql = yield* SqlClient.SqlClient
  const subscription = yield* events.subscribe
  const handle = Effect.fnUntraced(function*(event: EventEnvelope) {
    const inbound = inboundText(event)
    if (inbound === null || !isStopWord(inbound.text)) return
    yield* Effect.gen(function*() {
      const rows = yield* sql<{ id: number }>`
        UPDATE contacts SET opted_out_at = now(), updated_at = now()
        WHERE company_id = ${event.company_id} AND opted_out_at IS NULL
          AND id = (SELECT contact_id FROM conversations WHERE company_id = ${event.company_id} AND id = ${inbound.conversationId})
        RETURNING id`
      if (rows.length === 0) return
      const id = Number(rows[0].id)
      yield* events.emit(event.company_id, "contact.opted_out", { contact: { id }, contact_id: id, source: "stop_word" })
    }).pipe(sql.withTransaction)
  })
  yield* Effect.forkScoped(Effect.forever(
    PubSub.take(subscription).pipe(
      Effect.flatMap(handle),
      Effect.catchCause((cause) => Effect.logWarning("stop-word opt-out failed", cause))
    )
  ))
}))

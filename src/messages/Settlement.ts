import { Clock, Context, Effect, Layer, Option, Predicate } from "effect"
import { SqlClient } from "effect/sql"
import { type CompanyId, type CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { Conflict, type Forbidden, invalidField, type NotFound, notFound, ruleViolation, type Unprocessable } from "../platform/Errors.ts"
import { Idempotency, keyInFlightMessage } from "../platform/Idempotency.ts"
import type { Message, SettleKey } from "./Domain.ts"
import { type MessageRow, MessagesRepo, toMessage } from "./Repo.ts"
import { createdPayload } from "./Rules.ts"

/** What ends a send's unknown outcome: the provider's word (a status webhook) or an operator's. */
export interface Outcome {
  readonly status: "sent" | "delivered" | "read" | "failed"
  readonly externalMessageId: string | null
  readonly error: string | null
}

const refOf = (body: unknown) =>
  Predicate.isObject(body) && "message_id" in body && Predicate.isNumber(body.message_id) ? body.message_id : null

const notSentError = "Settled by an operator: the provider did not send it."

/**
 * Settles sends cut off during the provider call (message `pending`, key abandoned or `outcome_unknown`):
 * the message takes the outcome, every unsettled key that points to it answers it (201, as the send would
 * have), and `message.created`, which the cut-off send never emitted, is published.
 */
export class Settlement extends Context.Service<Settlement, {
  /**
   * Inside the caller's transaction, on a message it locked. A message no longer `pending` keeps its outcome;
   * its unsettled keys get it.
   */
  record(companyId: CompanyId, row: MessageRow, outcome: Outcome): Effect.Effect<Message>
  /** Whether a pending message was written longer ago than any live send takes, so its send is over. */
  cutOff(row: MessageRow): Effect.Effect<boolean>
  /** The operator's endpoint: the company's key with this value, settled as `sent` or `not_sent`. */
  settleKey(key: string, input: SettleKey): Effect.Effect<Message, Forbidden | NotFound | Unprocessable | Conflict, CurrentActor>
}>()("crm/messages/Settlement") {
  static readonly layerNoDeps = Layer.effect(
    Settlement,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* MessagesRepo
      const events = yield* Events
      const idempotency = yield* Idempotency

      const record = Effect.fnUntraced(function*(companyId: CompanyId, row: MessageRow, outcome: Outcome) {
        const open = row.status === "pending"
        const updated = open
          ? yield* repo.update(companyId, row.id, {
            status: outcome.status,
            ...(row.external_message_id === null && outcome.externalMessageId !== null ? { externalMessageId: outcome.externalMessageId } : {})
          })
          : row
        if (open) yield* repo.addStatus(companyId, row.id, outcome.status, outcome.error)
        const attachments = yield* repo.attachments(companyId, [row.id])
        const message = toMessage(updated, attachments.get(row.id) ?? [], yield* Clock.currentTimeMillis)
        yield* sql`WITH ${idempotency.settling(companyId, { message_id: row.id }, 201, { data: message })} SELECT 1`.pipe(Effect.orDie)
        if (open) yield* events.emit(companyId, "message.created", createdPayload(message))
        return message
      })

      const cutOff = (row: MessageRow) =>
        Effect.map(Clock.currentTimeMillis, (now) => row.status === "pending" && now - row.created_at.getTime() >= idempotency.abandonedAfterMs)

      const settleKey = Effect.fn("Settlement.settleKey")(function*(key: string, input: SettleKey) {
        const company = yield* requirePermission("company.update")
        const wanted = input.message_id ?? null
        const found = (yield* idempotency.byKey(company.id, key)).filter((k) => wanted === null || refOf(k.ref) === wanted)
        if (found.length === 0) return yield* notFound("Idempotency key not found.")
        if (found.length > 1) {
          return yield* invalidField("message_id", "Several requests used this key; name the message_id of the one to settle.")
        }
        const [state] = found
        if (state.state === "pending") return yield* new Conflict({ message: keyInFlightMessage })
        if (state.state === "done") return yield* ruleViolation("key_settled", "This idempotency key already has its outcome.")
        const messageId = refOf(state.ref)
        if (messageId === null) return yield* ruleViolation("key_without_message", "This idempotency key stored no message.")
        return yield* Effect.gen(function*() {
          const row = yield* repo.findForUpdate(company.id, messageId)
          if (Option.isNone(row)) return yield* notFound("Idempotency key not found.")
          return yield* record(company.id, row.value, input.outcome === "sent"
            ? { status: "sent", externalMessageId: input.external_message_id ?? null, error: null }
            : { status: "failed", externalMessageId: null, error: notSentError })
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
      })

      return Settlement.of({ record, cutOff, settleKey })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([MessagesRepo.layer, Idempotency.layer]))
}

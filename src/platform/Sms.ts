import { Context, Data, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "./Config.ts"

export class SmsError extends Data.TaggedError("SmsError")<{ readonly message: string }> {}

export interface SmsMessage {
  readonly to: string
  readonly body: string
}

/** The SMS port (phone verification codes). */
export class Sms extends Context.Service<Sms, {
  send(message: SmsMessage): Effect.Effect<void, SmsError>
}>()("crm/platform/Sms") {
  /**
   * The sandbox: every message becomes a row of `outbound_sms`, readable in dev.
   * `SMS_MODE=fail` turns it into a gateway that refuses everything, for the 502 path.
   */
  static readonly layer = Layer.effect(
    Sms,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const config = yield* AppConfig
      const send = Effect.fn("Sms.send")(function*(message: SmsMessage) {
        if (config.smsMode === "fail") return yield* new SmsError({ message: "The SMS gateway refused the message." })
        yield* sql`INSERT INTO outbound_sms (to_number, body) VALUES (${message.to}, ${message.body})`.pipe(Effect.orDie)
      })
      return Sms.of({ send })
    })
  )
}

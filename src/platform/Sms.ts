import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
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
   * With `TWILIO_ACCOUNT_SID`, Twilio's Messages API; otherwise the sandbox: every message becomes a
   * row of `outbound_sms`, readable in dev. `SMS_MODE=fail` makes either refuse everything, for the 502 path.
   */
  static readonly layer = Layer.effect(
    Sms,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const config = yield* AppConfig
      if (Option.isSome(config.twilioAccountSid) && config.smsMode !== "fail") return twilio(config, config.twilioAccountSid.value)
      const send = Effect.fn("Sms.send")(function*(message: SmsMessage) {
        if (config.smsMode === "fail") return yield* new SmsError({ message: "The SMS gateway refused the message." })
        yield* sql`INSERT INTO outbound_sms (to_number, body) VALUES (${message.to}, ${message.body})`.pipe(Effect.orDie)
      })
      return Sms.of({ send })
    })
  )
}

/**
 * `POST {base}/2010-04-01/Accounts/{sid}/Messages.json`, form-encoded `To`, `Body` and `From` (or
 * `MessagingServiceSid` for an `MG…` sender), HTTP Basic with the account SID and auth token.
 * No retry: a timed-out request may have been accepted, and the caller (send-otp) answers 502 so
 * the user asks again rather than getting two codes.
 */
const twilio = (config: AppConfig["Service"], accountSid: string) => {
  const token = Option.match(config.twilioAuthToken, { onNone: () => "", onSome: Redacted.value })
  const url = `${config.twilioApiBase.replace(/\/+$/, "")}/2010-04-01/Accounts/${encodeURIComponent(accountSid)}/Messages.json`
  const authorization = `Basic ${Buffer.from(`${accountSid}:${token}`).toString("base64")}`
  const send = Effect.fn("Sms.send")(function*(message: SmsMessage) {
    const form = new URLSearchParams({ To: message.to, Body: message.body })
    form.set(config.twilioFrom.startsWith("MG") ? "MessagingServiceSid" : "From", config.twilioFrom)
    const response = yield* Effect.tryPromise({
      try: (signal) =>
        fetch(url, {
          method: "POST",
          headers: { authorization, "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
          body: form,
          signal: AbortSignal.any([signal, AbortSignal.timeout(config.providerTimeoutMs)])
        }),
      catch: (error) => new SmsError({ message: `The SMS gateway did not answer: ${error instanceof Error ? error.message : String(error)}` })
    })
    const body = yield* Effect.promise(() => response.json().catch(() => ({}))) as Effect.Effect<{ sid?: string; code?: number; message?: string }>
    if (response.status !== 200 && response.status !== 201) {
      return yield* new SmsError({ message: `The SMS gateway refused the message (${response.status}${body.code === undefined ? "" : ` ${body.code}`}: ${body.message ?? "no message"}).` })
    }
    yield* Effect.logInfo("sms accepted").pipe(Effect.annotateLogs({ provider: "twilio", sid: body.sid ?? null }))
  })
  return Sms.of({ send })
}

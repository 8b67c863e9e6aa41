import { Context, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"

export interface Mail {
  readonly to: string
  readonly subject: string
  readonly body: string
}

/** The e-mail port (verification codes, invitations). */
export class Mailer extends Context.Service<Mailer, {
  send(mail: Mail): Effect.Effect<void>
}>()("crm/platform/Mailer") {
  /**
   * The sandbox: every mail becomes a row of `outbound_emails`, readable in dev.
   * Called inside a transaction it commits or rolls back with the caller's write.
   */
  static readonly layer = Layer.effect(
    Mailer,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const send = Effect.fn("Mailer.send")(function*(mail: Mail) {
        yield* sql`INSERT INTO outbound_emails (to_address, subject, body) VALUES (${mail.to}, ${mail.subject}, ${mail.body})`
      }, Effect.orDie)
      return Mailer.of({ send })
    })
  )
}

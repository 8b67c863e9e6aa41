import { Clock, Context, Data, Duration, Effect, Fiber, Layer, Option, Redacted, type Result } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "./Config.ts"
import { drainBudgetMs, wallSleep } from "./Shutdown.ts"

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
   * The outbox: every mail becomes a `pending` row of `outbound_emails`; the drain (`MailDrainLayer`)
   * sends it. Called inside a transaction it commits or rolls back with the caller's write, so a
   * rolled-back invitation never mails.
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

/** The server did not accept the mail. `permanent` (an SMTP 5xx): retrying cannot help. */
export class MailRefused extends Data.TaggedError("MailRefused")<{
  readonly message: string
  readonly permanent: boolean
}> {}

/** Where the drain hands a mail: SMTP when `SMTP_URL` is set, else the log. */
export class MailTransport extends Context.Service<MailTransport, {
  readonly kind: "smtp" | "log"
  /** Resolves once the server accepted the message (its id), fails when it did not. */
  deliver(mail: Mail): Effect.Effect<string, MailRefused>
}>()("crm/platform/MailTransport") {
  static readonly layer = Layer.effect(
    MailTransport,
    Effect.gen(function*() {
      const config = yield* AppConfig
      if (Option.isNone(config.smtpUrl)) {
        yield* Effect.logInfo("SMTP_URL is not set: mails are written to the log (codes redacted), not sent")
        return MailTransport.of({
          kind: "log",
          deliver: (mail) =>
            Effect.logInfo("mail not sent (no SMTP_URL)").pipe(
              Effect.annotateLogs({ to: mail.to, subject: mail.subject, text: redactSecrets(mail.body) }),
              Effect.as("logged")
            )
        })
      }
      // Loaded only where mail is sent: a server without SMTP_URL never needs it.
      const { createTransport } = yield* Effect.promise(() => import("nodemailer"))
      const transport = createTransport(withTimeouts(Redacted.value(config.smtpUrl.value)), { from: config.mailFrom })
      yield* Effect.addFinalizer(() => Effect.sync(() => transport.close()))
      return MailTransport.of({
        kind: "smtp",
        deliver: (mail) =>
          Effect.tryPromise({
            try: () => transport.sendMail({ to: mail.to, subject: mail.subject, text: mail.body }),
            catch: (error) => {
              const code = (error as { responseCode?: number }).responseCode
              return new MailRefused({
                message: error instanceof Error ? error.message : String(error),
                permanent: code !== undefined && code >= 500
              })
            }
          }).pipe(Effect.map((info) => String(info.messageId ?? "")))
      })
    })
  )
}

/** Short timeouts (unless the URL sets its own), so one exchange fits well inside a claim's lease. */
const withTimeouts = (smtpUrl: string) => {
  const url = new URL(smtpUrl)
  for (const [key, ms] of [["connectionTimeout", 10_000], ["greetingTimeout", 10_000], ["socketTimeout", 30_000]] as const) {
    if (!url.searchParams.has(key)) url.searchParams.set(key, String(ms))
  }
  return url.toString()
}

/** Codes (4+ digits) and link tokens (20+ URL-safe characters) out of a mail body, for the log. */
export const redactSecrets = (text: string) =>
  text.replace(/\b\d{4,}\b/g, "[redacted]").replace(/[A-Za-z0-9_-]{20,}/g, "[redacted]")

interface OutboxRow {
  readonly id: number
  readonly to_address: string
  readonly subject: string
  readonly body: string
  readonly attempts: number
}

const claimBatch = 20
/** At shutdown, how long the mail in its SMTP exchange may take to finish. */
const mailDrainMs = 3_000
/** Longer than one SMTP exchange may take (connection, greeting and socket timeouts). */
const lease = Duration.minutes(2)

/**
 * One pass over the outbox: claims due mails one by one (each committed as `sending` before the server
 * is contacted), delivers each and records the outcome. A refused send is retried with doubling
 * backoff up to `MAIL_MAX_ATTEMPTS`; an accepted one is `sent` and never claimed again. A claim
 * whose lease ran out (its runner died mid-send) may have been accepted, so it becomes `unknown`,
 * not a second send. Uninterruptible but for the SMTP exchange, so a claim is never cut from the exchange
 * it is for; `running` is asked before each claim. Returns how many mails were claimed.
 */
export const drainMailWhile = (running: () => boolean) => Effect.uninterruptibleMask((restore) => Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const transport = yield* MailTransport
  const now = new Date(yield* Clock.currentTimeMillis)
  const lost = yield* sql<{ id: number; to_address: string }>`
    UPDATE outbound_emails SET status = 'unknown', lease_until = NULL, last_error = 'the sender stopped during the SMTP exchange'
    WHERE status = 'sending' AND lease_until < ${now} RETURNING id, to_address`
  for (const row of lost) {
    yield* Effect.logWarning("mail outcome unknown: not sent again").pipe(Effect.annotateLogs({ mail_id: row.id, to: row.to_address }))
  }
  // One claim per mail, just before its exchange: a runner that dies (kill -9) or stops leaves at most the mail
  // in its SMTP exchange claimed, never a batch of mails it had not begun.
  let claimed = 0
  while (claimed < claimBatch && running()) {
    const at = new Date(yield* Clock.currentTimeMillis)
    const rows = yield* sql<OutboxRow>`
      UPDATE outbound_emails SET status = 'sending', attempts = attempts + 1, lease_until = ${new Date(at.getTime() + Duration.toMillis(lease))}
      WHERE id = (
        SELECT id FROM outbound_emails WHERE status = 'pending' AND next_attempt_at <= ${at}
        ORDER BY next_attempt_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
      RETURNING id, to_address, subject, body, attempts`
    const row = rows[0]
    if (row === undefined) break
    claimed++
    // Interruptible only during the exchange (it stays `sending`: it may have been accepted); an accepted mail's outcome is always recorded.
    const outcome = yield* Effect.result(restore(transport.deliver({ to: row.to_address, subject: row.subject, body: row.body })))
    yield* record(row, outcome)
  }
  return claimed
})).pipe(Effect.withSpan("Mail.drain"))

export const drainMail = drainMailWhile(() => true)

const record = (row: OutboxRow, outcome: Result.Result<string, MailRefused>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const transport = yield* MailTransport
    const config = yield* AppConfig
    const at = new Date(yield* Clock.currentTimeMillis)
    if (outcome._tag === "Success") {
      yield* sql`
        UPDATE outbound_emails SET status = ${transport.kind === "smtp" ? "sent" : "logged"}, sent_at = ${at},
          message_id = ${outcome.success}, lease_until = NULL, last_error = NULL
        WHERE id = ${row.id}`
      return
    }
    const error = outcome.failure
    const final = error.permanent || row.attempts >= config.mailMaxAttempts
    const delay = Math.min(config.mailRetryBaseMs * 2 ** (row.attempts - 1), 3_600_000)
    yield* sql`
      UPDATE outbound_emails SET status = ${final ? "failed" : "pending"}, lease_until = NULL, last_error = ${error.message.slice(0, 1000)},
        next_attempt_at = ${new Date(at.getTime() + delay)}
      WHERE id = ${row.id}`
    yield* (final ? Effect.logError("mail not delivered") : Effect.logWarning("mail refused; will retry")).pipe(
      Effect.annotateLogs({ mail_id: row.id, attempt: row.attempts, error: error.message, ...(final ? {} : { retry_in_ms: delay }) })
    )
  })

/**
 * The mail drain: a sweep every `MAIL_POLL_MS`, at once again while a sweep found a full batch. At shutdown it
 * finishes the mail in its SMTP exchange (within the drain budget) and hands the rest of its batch back.
 * Register in `src/Background.ts`.
 */
export const MailDrainLayer = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* AppConfig
  let running = true
  let sweeping = false
  const sweep: Effect.Effect<void, never, SqlClient.SqlClient | MailTransport | AppConfig> = drainMailWhile(() => running).pipe(
    Effect.flatMap((claimed) => (claimed >= claimBatch && running ? sweep : Effect.void)),
    Effect.catchCause((cause) => Effect.logWarning("mail drain sweep failed", cause))
  )
  const loop = Effect.gen(function*() {
    while (running) {
      sweeping = true
      yield* sweep
      sweeping = false
      if (running) yield* Effect.sleep(Duration.millis(config.mailPollMs))
    }
  })
  const fiber = yield* Effect.forkScoped(loop)
  // Before the scope interrupts the loop: a sweep under way may finish its current mail.
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => {
      running = false
      return sweeping ? Effect.raceFirst(Effect.asVoid(Fiber.await(fiber)), wallSleep(drainBudgetMs(mailDrainMs))) : Effect.void
    })
  )
})).pipe(Layer.provide(MailTransport.layer))

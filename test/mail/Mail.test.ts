import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { afterAll, beforeAll } from "vitest"
import { drainMail, MailTransport, redactSecrets } from "../../src/platform/Mail.ts"
import { mobileLogin } from "../auth/support.ts"
import { SmtpFake } from "../fakes/SmtpFake.ts"
import { freshDatabase } from "../support/Databases.ts"
import { uniqueEmail } from "../support/Ids.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let smtp: SmtpFake
let server: RunningServer
let database: { readonly url: string; readonly drop: () => Promise<void> } | undefined
beforeAll(async () => {
  smtp = await new SmtpFake().start()
  // A database of its own: every server of the suite drains the one outbox of its database, and another
  // file's server would deliver these mails through its own transport.
  if (process.env.DATABASE_URL !== undefined) database = await freshDatabase(process.env.DATABASE_URL)
  server = await startServer({
    ...(database === undefined ? {} : { databaseUrl: Option.some(Redacted.make(database.url)) }),
    smtpUrl: Option.some(Redacted.make(smtp.url)),
    mailFrom: "CRM Test <no-reply@crm.test>",
    mailPollMs: 50,
    mailRetryBaseMs: 100,
    mailMaxAttempts: 4,
    appUrl: "https://app.example.test"
  })
})
afterAll(async () => {
  await server?.close()
  await smtp?.close()
  await database?.drop()
})

const until = async <A>(what: string, probe: () => Promise<A | undefined> | A | undefined, ms = 10_000): Promise<A> => {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    const value = await probe()
    if (value !== undefined) return value
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`timed out waiting for ${what}`)
}

const outboxOf = (email: string) =>
  query<{ id: string; status: string; attempts: number; message_id: string | null; last_error: string | null }>(
    server,
    "SELECT id, status, attempts, message_id, last_error FROM outbound_emails WHERE lower(to_address) = lower($1) ORDER BY id",
    [email]
  )

const settled = (email: string) =>
  until(`the outbox row of ${email} to settle`, async () => {
    const rows = await outboxOf(email)
    return rows.length > 0 && rows.every((r) => r.status !== "pending" && r.status !== "sending") ? rows : undefined
  })

describe("mail over SMTP", () => {
  it("delivers the e-mail verification code to the SMTP server, once", async () => {
    const company = await createCompany(server)
    const login = await mobileLogin(server, company.admin.email, company.admin.password)
    assert.strictEqual(login.status, 200)
    const mail = await until("the code mail", () => smtp.to(company.admin.email)[0])
    assert.strictEqual(mail.subject, "Your verification code")
    assert.strictEqual(mail.from, "no-reply@crm.test")
    assert.match(mail.raw, /^From: CRM Test <no-reply@crm\.test>/m)
    const code = /verification code is (\d{6})\./.exec(mail.text)?.[1]
    assert.ok(code !== undefined, mail.text)
    const verified = await request(server, "POST", "/v1/auth/email/verify-code", { token: login.body.data.token, body: { code } })
    assert.strictEqual(verified.status, 200, JSON.stringify(verified.body))

    const [row] = await settled(company.admin.email)
    assert.strictEqual(row.status, "sent")
    assert.strictEqual(row.attempts, 1)
    assert.ok(row.message_id !== null && row.message_id.length > 0)
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.strictEqual(smtp.to(company.admin.email).length, 1)
  })

  it("delivers an invitation with its invite_url; another company's invitation is not found", async () => {
    const company = await createCompany(server, { name: "Mailed Ltd" })
    const email = uniqueEmail("invitee")
    const res = await request(server, "POST", "/v1/invitations", { token: company.token, body: { email, role: "agent" } })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    const invitation = res.body.data.invitation
    const mail = await until("the invitation mail", () => smtp.to(email)[0])
    assert.strictEqual(mail.subject, "You are invited to join Mailed Ltd")
    assert.include(mail.text, invitation.invite_url)

    const other = await createCompany(server)
    const foreign = await request(server, "POST", `/v1/invitations/${invitation.id}/revoke`, { token: other.token })
    assert.strictEqual(foreign.status, 404)
  })

  it("retries a transient refusal with backoff and sends once the server accepts", async () => {
    const email = uniqueEmail("retry")
    smtp.refuseNext(451, "Try again later")
    smtp.refuseNext(421, "Busy")
    await query(server, "INSERT INTO outbound_emails (to_address, subject, body) VALUES ($1, 'Retry', 'Your code is 424242.')", [email])
    const [row] = await settled(email)
    assert.strictEqual(row.status, "sent")
    assert.strictEqual(row.attempts, 3)
    assert.strictEqual(smtp.to(email).length, 1)
    assert.include(smtp.to(email)[0].text, "424242")
  })

  it("gives up at once on a permanent refusal", async () => {
    const email = uniqueEmail("refused")
    smtp.refuseNext(550, "No such user")
    await query(server, "INSERT INTO outbound_emails (to_address, subject, body) VALUES ($1, 'Nope', 'Hello')", [email])
    const [row] = await settled(email)
    assert.strictEqual(row.status, "failed")
    assert.strictEqual(row.attempts, 1)
    assert.match(row.last_error ?? "", /550/)
    assert.strictEqual(smtp.to(email).length, 0)
  })

  it("never sends again a mail whose sender died mid-exchange (at most once)", async () => {
    const email = uniqueEmail("unknown")
    await query(server, `
      INSERT INTO outbound_emails (to_address, subject, body, status, attempts, lease_until)
      VALUES ($1, 'Maybe', 'Maybe sent', 'sending', 1, now() - interval '1 second')`, [email])
    const [row] = await settled(email)
    assert.strictEqual(row.status, "unknown")
    assert.strictEqual(smtp.to(email).length, 0)
  })
})

describe("mail without SMTP", () => {
  it("is logged with codes and link tokens redacted, and marked logged", async () => {
    assert.strictEqual(
      redactSecrets("Your code is 123456. Accept: https://app.test/invitation/0b9f5a8e-6c1d-4f7a-9e2b-1c3d5e7f9a0b?token=abcdefghijklmnopqrstuvwxyz"),
      "Your code is [redacted]. Accept: https://app.test/invitation/[redacted]?token=[redacted]"
    )
    const email = uniqueEmail("logged")
    await query(server, "INSERT INTO outbound_emails (to_address, subject, body, next_attempt_at) VALUES ($1, 'Logged', 'Code 123456', now() + interval '1 hour')", [email])
    const delivered: Array<string> = []
    const logTransport = Layer.succeed(MailTransport, MailTransport.of({
      kind: "log",
      deliver: (mail) => Effect.sync(() => delivered.push(mail.to)).pipe(Effect.as("logged"))
    }))
    await query(server, "UPDATE outbound_emails SET next_attempt_at = now() - interval '1 second' WHERE to_address = $1", [email])
    // The server's own drain may win the race for this row; either way it ends up handled exactly once.
    await server.runInApp(drainMail.pipe(Effect.provide(logTransport)))
    const [row] = await settled(email)
    assert.include(["logged", "sent"], row.status)
    assert.strictEqual(delivered.length + smtp.to(email).length, 1)
  })
})

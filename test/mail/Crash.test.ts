import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { SmtpFake } from "../fakes/SmtpFake.ts"
import { freshDatabase } from "../support/Databases.ts"
import { unique } from "../support/Ids.ts"
import { type ServerProcess, sleep, spawnServer } from "../support/Processes.ts"

// The mail drain across a kill -9 of its server, with a relay that takes its time to accept: the mail in the
// SMTP exchange at the kill is accepted by the relay once and never sent again; the rest of the outbox is
// delivered by the restarted server.

describe.runIf(process.env.DATABASE_URL)("mail delivery across a kill -9", () => {
  let database: { readonly url: string; readonly drop: () => Promise<void> }
  let db: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, never>
  let smtp: SmtpFake
  const processes: Array<ServerProcess> = []

  beforeAll(async () => {
    database = await freshDatabase(process.env.DATABASE_URL!)
    db = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(database.url), maxConnections: 1 }).pipe(Layer.orDie))
    smtp = await new SmtpFake().start()
  }, 60_000)

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop(2_000)))
    await smtp?.close()
    await db?.dispose()
    await database?.drop()
  }, 60_000)

  const sql = <A extends object>(text: string, params: ReadonlyArray<unknown> = []) =>
    db.runPromise(Effect.gen(function*() {
      const s = yield* SqlClient.SqlClient
      return yield* s.unsafe<A>(text, params as Array<unknown>)
    }).pipe(Effect.orDie))

  const until = async <A>(what: string, probe: () => Promise<A | undefined> | A | undefined, ms = 30_000): Promise<A> => {
    const deadline = Date.now() + ms
    while (Date.now() < deadline) {
      const value = await probe()
      if (value !== undefined) return value
      await sleep(25)
    }
    throw new Error(`timed out waiting for ${what}\n${processes.map((p) => p.output().slice(-3000)).join("\n")}`)
  }

  it("delivers the accepted mail once, never again, and the rest of the outbox after the restart", async () => {
    const env = {
      DATABASE_URL: database.url,
      CLUSTER: "single",
      SMTP_URL: smtp.url,
      MAIL_FROM: "CRM <no-reply@crm.test>",
      MAIL_POLL_MS: "100"
    }
    const first = await spawnServer("mail-1", env, { readyTimeoutMs: 90_000 })
    processes.push(first)
    smtp.acceptDelayMs = 2_000
    const run = unique("crash")
    const addresses = [1, 2, 3, 4, 5].map((n) => `mail-${n}-${run}@example.test`)
    for (const to of addresses) {
      await sql("INSERT INTO outbound_emails (to_address, subject, body) VALUES ($1, 'Crash test', $2)", [to, `Body for ${to}`])
    }

    // The first mail's DATA is in and the relay has not answered yet: the server dies in the middle of the exchange.
    await until("the first mail's exchange", () => (smtp.receiving === 1 ? true : undefined))
    process.kill(first.pid!, "SIGKILL")
    await first.stop(1_000)
    const atKill = await sql<{ to_address: string; status: string }>(
      "SELECT to_address, status FROM outbound_emails WHERE to_address = ANY($1) ORDER BY id",
      [addresses]
    )
    assert.deepStrictEqual(atKill.map((r) => r.status), ["sending", "pending", "pending", "pending", "pending"], "only the mail in its exchange was claimed")
    // The relay accepts it all the same.
    await until("the relay to accept the cut-off mail", () => (smtp.to(addresses[0]).length === 1 ? true : undefined))

    smtp.acceptDelayMs = 50
    const second = await spawnServer("mail-2", env, { readyTimeoutMs: 90_000 })
    processes.push(second)
    await until("the rest of the outbox", async () => {
      const rows = await sql<{ status: string }>("SELECT status FROM outbound_emails WHERE to_address = ANY($1) ORDER BY id", [addresses.slice(1)])
      return rows.every((r) => r.status === "sent") ? rows : undefined
    })
    for (const to of addresses.slice(1)) assert.strictEqual(smtp.to(to).length, 1, to)

    // Once its lease runs out, the cut-off mail's outcome is unknown: it is not sent a second time.
    await sql("UPDATE outbound_emails SET lease_until = now() - interval '1 second' WHERE to_address = $1", [addresses[0]])
    const [lost] = await until("the cut-off mail to be settled", async () => {
      const rows = await sql<{ status: string; attempts: number }>("SELECT status, attempts FROM outbound_emails WHERE to_address = $1", [addresses[0]])
      return rows[0]?.status === "unknown" ? rows : undefined
    })
    assert.strictEqual(lost.attempts, 1)
    await sleep(500)
    assert.strictEqual(smtp.to(addresses[0]).length, 1, "accepted once, never sent again")
  }, 240_000)
})

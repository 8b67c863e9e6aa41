import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import { telegramChannel } from "../stickers/telegram.ts"
import { freshDatabase } from "../support/Databases.ts"
import { type ServerProcess, shardsSettled, spawnServer } from "../support/Processes.ts"
import { createCompany, request, type RunningServer } from "../support/TestServer.ts"
import { audience, broadcastBody, pgQuery, type Query, recipientsOf, sleep, waitFor } from "./support.ts"

const baseUrl = process.env.DATABASE_URL
const platformKey = `broadcast-failover-key-${Math.random().toString(36).slice(2)}`
const size = 300

const asServer = (p: ServerProcess): RunningServer => ({
  url: p.url,
  platformKey,
  realtimePort: p.realtimePort,
  pusherAppKey: "crm",
  runInApp: () => Promise.reject(new Error("not in process")),
  close: async () => {}
})

/**
 * Two runners in server mode, each with a Telegram fake of its own, so that the runner driving the run
 * is the one whose fake receives the sends. `kill -9` of that runner mid-run: the run moves to the
 * survivor and completes there, every recipient in one final status, none delivered twice.
 */
describe.runIf(baseUrl)("a broadcast run across a kill -9 of the runner driving it", () => {
  const fakes = { a: new TelegramFake(), b: new TelegramFake() }
  let database: { readonly url: string; readonly drop: () => Promise<void> }
  let db: Query
  const processes: Record<"a" | "b", ServerProcess | undefined> = { a: undefined, b: undefined }
  const env = (fake: TelegramFake) => ({
    DATABASE_URL: database.url,
    CLUSTER: "socket",
    PLATFORM_API_KEY: platformKey,
    TELEGRAM_API_BASE: fake.http.url,
    PROVIDER_TIMEOUT_MS: "2000",
    CLUSTER_LEASE_MS: "6000",
    RUNNER_HEALTH_CHECK_MS: "1000",
    RATE_LIMIT_PER_WINDOW: "100000"
  })

  beforeAll(async () => {
    await Promise.all([fakes.a.http.start(), fakes.b.http.start()])
    database = await freshDatabase(baseUrl!)
    db = pgQuery(database.url)
    // One after the other: the first runs the migrations on the empty database.
    processes.a = await spawnServer("broadcast-runner-a", env(fakes.a))
    processes.b = await spawnServer("broadcast-runner-b", env(fakes.b))
    await shardsSettled((text) => db(text))
  }, 180_000)

  afterAll(async () => {
    await Promise.all(Object.values(processes).map((p) => p?.stop(2_000)))
    await Promise.all([fakes.a.http.close(), fakes.b.http.close()])
    await database?.drop()
  }, 60_000)

  it("moves the run to the survivor: it completes there, every recipient in one final status, none sent twice", async () => {
    const viaB = asServer(processes.b!)
    const company = await createCompany(viaB)
    const bot = await telegramChannel(viaB, fakes.b, company.token)
    fakes.a.tokens.add(bot.botToken)
    const { segmentId, contactIds } = await audience(viaB, db, company, size, { firstName: "Fo" })
    // Telegram chat ids are numbers.
    await db("UPDATE contact_accounts SET external_id = (700000 + contact_id)::text WHERE company_id = $1", [company.id])
    const created = await request(viaB, "POST", "/v1/broadcasts", { token: company.token, body: broadcastBody(segmentId, [bot.id]) })
    assert.strictEqual(created.status, 201, JSON.stringify(created.body))
    const id = created.body.data.id as number

    // Telegram's ceiling (30/s per bot) makes the run last about 10 s; the driver is whoever sends.
    const sent = (fake: TelegramFake) => fake.http.calls("sendMessage").filter((c) => String(c.body.text).startsWith("Hi Fo"))
    const deadline = Date.now() + 60_000
    let owner: "a" | "b"
    while (true) {
      if (sent(fakes.a).length >= 40) owner = "a"
      else if (sent(fakes.b).length >= 40) owner = "b"
      else {
        if (Date.now() > deadline) throw new Error("the run did not start")
        await sleep(20)
        continue
      }
      break
    }
    const survivor = owner === "a" ? "b" : "a"
    const dying = processes[owner]!
    process.kill(dying.pid!, "SIGKILL")
    await dying.stop(1_000)
    processes[owner] = undefined
    const byOwner = sent(fakes[owner]).length
    const [{ left }] = await db("SELECT count(*)::int AS left FROM broadcast_recipients WHERE broadcast_id = $1 AND status = 'pending'", [id])
    assert.isAbove(left, 0, "the kill came after the run had ended")

    const finished = await waitFor(asServer(processes[survivor]!), company.token, id, (b) => b.status !== "active", 120_000)
    const outcomes = await db(
      "SELECT status, error_message, count(*)::int AS n FROM broadcast_recipients WHERE broadcast_id = $1 GROUP BY 1, 2",
      [id]
    )
    assert.strictEqual(finished.status, "completed", JSON.stringify(outcomes))
    assert.strictEqual(finished.runs.length, 1)
    assert.isAbove(sent(fakes[survivor]).length, 0, "the survivor sent nothing")
    assert.strictEqual(sent(fakes[owner]).length, byOwner, "the dead runner sent after its kill")

    const recipients = await recipientsOf(db, id)
    assert.strictEqual(recipients.length, contactIds.length)
    for (const r of recipients) assert.include(["sent", "failed"], r.status, `recipient ${r.id}`)
    const unknown = recipients.filter((r) => r.status === "failed")
    for (const r of unknown) assert.strictEqual(r.error_message, "outcome_unknown")

    // Each contact's text ("Hi Fo<n>") went out at most once over both fakes, and once for each sent recipient.
    const deliveries = new Map<string, number>()
    for (const call of [...sent(fakes.a), ...sent(fakes.b)]) deliveries.set(String(call.body.text), (deliveries.get(String(call.body.text)) ?? 0) + 1)
    assert.deepStrictEqual([...deliveries].filter(([, n]) => n > 1), [])
    const names = new Map((await db("SELECT id, first_name FROM contacts WHERE company_id = $1", [company.id])).map((c) => [Number(c.id), c.first_name]))
    for (const r of recipients.filter((r) => r.status === "sent")) {
      assert.strictEqual(deliveries.get(`Hi ${names.get(Number(r.contact_id))}`), 1, `sent recipient ${r.id}`)
    }
    const [{ duplicated }] = await db(
      `SELECT count(*)::int AS duplicated FROM (SELECT metadata->>'broadcast_recipient_id' FROM messages
       WHERE company_id = $1 AND direction = 'outbound' GROUP BY 1 HAVING count(*) > 1) d`,
      [company.id]
    )
    assert.strictEqual(duplicated, 0)
    console.log(
      `broadcast failover: ${byOwner} sent by the killed runner, ${sent(fakes[survivor]).length} by the survivor, ${unknown.length} outcome_unknown`
    )
  }, 240_000)
})

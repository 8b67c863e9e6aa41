import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, ManagedRuntime, Redacted, Scope } from "effect"
import type { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import { telegramChannel } from "../stickers/telegram.ts"
import { freshDatabase } from "../support/Databases.ts"
import { type ServerProcess, shardsSettled, sleep, spawnServer } from "../support/Processes.ts"
import { connectPusher, subscribe } from "../support/PusherClient.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer } from "../support/TestServer.ts"

const baseUrl = process.env.DATABASE_URL
const platformKey = `failover-platform-key-${Math.random().toString(36).slice(2)}`
const sends = 500
const chats = 24

type Db = ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown>

/** The helpers take a RunningServer: a process answers the same HTTP, and `query` needs only its database. */
const asServer = (p: ServerProcess, db: Db): RunningServer => ({
  url: p.url,
  platformKey,
  realtimePort: p.realtimePort,
  pusherAppKey: "crm",
  runInApp: (effect) => db.runPromise(effect as Effect.Effect<any, any, SqlClient.SqlClient>),
  close: async () => {}
})

type Final =
  | { readonly kind: "sent"; readonly id: number; readonly status: string }
  | { readonly kind: "outcome_unknown" }
  | { readonly kind: "refused" }

const tally = (values: ReadonlyArray<string | number>) =>
  values.reduce<Record<string, number>>((acc, v) => ({ ...acc, [v]: (acc[v] ?? 0) + 1 }), {})

/**
 * Two runners in server mode; `kill -9` of one of them while 500 keyed sends run through it (their
 * conversations' entities spread over both). Every key is then retried against the survivor, which takes
 * over the dead runner's shards, settles the keys the dead one left in progress, and keeps publishing.
 * The killed runner is then started again and answers every key the same way.
 */
describe.runIf(baseUrl)("failover between two runners, and idempotency keys after a kill -9", () => {
  const tg = new TelegramFake()
  let database: { readonly url: string; readonly drop: () => Promise<void> }
  let db: Db
  const processes: Array<ServerProcess> = []
  const env = () => ({
    DATABASE_URL: database.url,
    CLUSTER: "socket",
    PLATFORM_API_KEY: platformKey,
    TELEGRAM_API_BASE: tg.http.url,
    REQUEST_DEADLINE_MS: "3000",
    IDEMPOTENCY_LEASE_MS: "2000",
    PROVIDER_TIMEOUT_MS: "2000",
    CLUSTER_LEASE_MS: "6000",
    RUNNER_HEALTH_CHECK_MS: "1000",
    RATE_LIMIT_PER_WINDOW: "100000",
    // The failover itself is under test, not the bot's pacing: 500 sends to 24 chats at Telegram's own
    // limits (about one a second per chat) would outlast the request deadline many times over.
    TELEGRAM_SENDS_PER_SECOND: "100000",
    TELEGRAM_CHAT_BURST: "100000"
  })

  beforeAll(async () => {
    await tg.http.start()
    database = await freshDatabase(baseUrl!)
    db = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(database.url), maxConnections: 1 }).pipe(Layer.orDie))
    // One after the other: the first runs the migrations on the empty database.
    processes.push(await spawnServer("runner-a", env()))
    processes.push(await spawnServer("runner-b", env()))
    // Wait until each runner holds its share, so that the conversations' entities live on both.
    await shardsSettled((text) => query<{ pid: number; shards: number }>(asServer(processes[0], db), text))
  }, 180_000)

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop(2_000)))
    await tg.http.close()
    await db?.dispose()
    await database?.drop()
  }, 60_000)

  it("moves the dead runner's conversations to the survivor: every key one final answer, nothing lost or delivered twice, every event once", async () => {
    const [a, b] = processes
    const viaA = asServer(a, db)
    const viaB = asServer(b, db)
    const company = await createCompany(viaB)
    const bot = await telegramChannel(viaB, tg, company.token)
    // Keyed and retried: on a loaded machine the request deadline (3 s here) may pass first.
    const threads = await Promise.all(Array.from({ length: chats }, async (_, i) => {
      while (true) {
        const opened = await request(viaB, "POST", "/v1/messages/send", {
          token: company.token,
          body: { channel_id: bot.id, to: { external_id: String(5000 + i) }, text: `opening ${i}` },
          headers: { "idempotency-key": `opening-${i}` }
        })
        if (opened.status === 201) return opened.body.data.thread_id as number
        assert.ok(opened.status === 503 || opened.status === 409, JSON.stringify(opened.body))
        await sleep(200)
      }
    }))

    // The subscriber is on the survivor; every event it sees is counted by its number.
    const scope = Effect.runSync(Scope.make())
    try {
      const received: Array<number> = []
      const sub = await Effect.runPromise(Effect.gen(function*() {
        const client = yield* connectPusher({ realtimePort: b.realtimePort, appKey: "crm", apiUrl: b.url, token: company.token })
        return yield* subscribe(client, `private-company.${company.id}`)
      }).pipe(Scope.provide(scope)))
      sub.bind("message.created", (data: { seq?: number }) => {
        if (typeof data?.seq === "number") received.push(data.seq)
      })
      const [{ since }] = await query<{ since: number }>(viaB, "SELECT coalesce(max(seq), 0)::int AS since FROM events WHERE company_id = $1", [company.id])

      const bodyOf = (i: number) => ({ channel_id: bot.id, thread_id: threads[i % chats], text: `crash ${i}` })
      const sendKeyed = (server: RunningServer, i: number) =>
        request(server, "POST", "/v1/messages/send", { token: company.token, body: bodyOf(i), headers: { "idempotency-key": `crash-key-${i}` } })
      const delivered = () => tg.http.calls("sendMessage").filter((r) => String(r.body.text).startsWith("crash "))

      const inFlight = Array.from({ length: sends }, (_, i) => sendKeyed(viaA, i).then((r) => r.status, () => 0))
      // The kill falls a third of the way in; on a loaded machine the requests may all have ended first
      // (503 past the deadline), and then the retries below carry the rest.
      let ended = false
      void Promise.all(inFlight).then(() => (ended = true))
      const killBy = Date.now() + 60_000
      while (delivered().length < sends / 3 && !ended && Date.now() < killBy) await sleep(2)
      const deliveredBeforeKill = delivered().length
      process.kill(a.pid!, "SIGKILL")
      const before = tally(await Promise.all(inFlight))
      await a.stop(1_000)

      const killed = Date.now()
      const finals = new Map<number, Final>()
      const statuses: Array<number> = []
      const rounds: Array<string> = []
      while (finals.size < sends && Date.now() - killed < 60_000) {
        const open = Array.from({ length: sends }, (_, i) => i).filter((i) => !finals.has(i))
        await Promise.all(open.map(async (i) => {
          const res = await sendKeyed(viaB, i)
          statuses.push(res.status)
          if (res.status === 201) finals.set(i, { kind: "sent", id: res.body.data.id, status: res.body.data.status })
          else if (res.status === 409 && res.body.reason === "outcome_unknown") {
            assert.deepStrictEqual(Object.keys(res.body).sort(), ["message", "reason"])
            finals.set(i, { kind: "outcome_unknown" })
          } else if (res.status === 422) finals.set(i, { kind: "refused" })
          // Otherwise a documented "retry": 409 while the key is in progress, 503 while its conversation moves.
          else assert.ok(res.status === 409 || res.status === 503, `${res.status} ${JSON.stringify(res.body)}`)
        }))
        rounds.push(`${Date.now() - killed}ms:${finals.size}`)
        if (finals.size < sends) await sleep(250)
      }
      const settledMs = Date.now() - killed
      assert.strictEqual(finals.size, sends, `unsettled after ${settledMs} ms: ${sends - finals.size} (${JSON.stringify(tally(statuses))})`)

      // Nothing delivered twice, nothing stored twice; a key answered `sent` was delivered once.
      const deliveries = new Map<string, number>()
      for (const call of delivered()) deliveries.set(String(call.body.text), (deliveries.get(String(call.body.text)) ?? 0) + 1)
      assert.deepStrictEqual([...deliveries].filter(([, n]) => n > 1), [])
      const stored = await query<{ text: string; n: number; status: string }>(
        viaB,
        `SELECT message_content AS text, count(*)::int AS n, min(status) AS status FROM messages
         WHERE company_id = $1 AND message_content LIKE 'crash %' GROUP BY message_content`,
        [company.id]
      )
      assert.deepStrictEqual(stored.filter((r) => r.n > 1), [])
      const byText = new Map(stored.map((r) => [r.text, r]))
      for (const [i, final] of finals) {
        const text = `crash ${i}`
        if (final.kind === "sent") {
          // A provider call that timed out under the load is a `failed` message (the documented outcome), delivered at most once.
          assert.strictEqual(byText.get(text)?.status, final.status, text)
          if (final.status === "sent") assert.strictEqual(deliveries.get(text), 1, text)
        }
        if (final.kind === "outcome_unknown") assert.strictEqual(byText.get(text)?.status, "pending", text)
      }
      const [{ pending }] = await query<{ pending: number }>(
        viaB,
        "SELECT count(*)::int AS pending FROM idempotency_keys WHERE company_id = $1 AND state = 'pending'",
        [company.id]
      )
      assert.strictEqual(pending, 0)

      // The subscriber on the survivor got every committed message.created once, the dead runner's included.
      const committed = (await query<{ seq: number }>(
        viaB,
        "SELECT seq::int AS seq FROM events WHERE company_id = $1 AND key = 'message.created' AND seq > $2 ORDER BY seq",
        [company.id, since]
      )).map((r) => r.seq)
      const waitUntil = Date.now() + 10_000
      while (received.length < committed.length && Date.now() < waitUntil) await sleep(100)
      assert.deepStrictEqual([...received].sort((x, y) => x - y), committed)

      // The killed runner, started again, gives every key the same answer.
      const again = await spawnServer("runner-a-again", env())
      processes.push(again)
      const viaAgain = asServer(again, db)
      const sample = [0, 1, sends - 1, ...[...finals].filter(([, f]) => f.kind !== "sent").map(([i]) => i)].slice(0, 40)
      for (const i of sample) {
        const res = await sendKeyed(viaAgain, i)
        const final = finals.get(i)!
        if (final.kind === "sent") assert.strictEqual(res.body.data?.id, final.id, JSON.stringify(res.body))
        else if (final.kind === "outcome_unknown") assert.deepStrictEqual([res.status, res.body.reason], [409, "outcome_unknown"])
        else assert.strictEqual(res.status, 422)
      }
      const kinds = tally([...finals.values()].map((f) => f.kind === "sent" ? `201 ${f.status}` : f.kind))
      console.log(
        `failover figures: ${deliveredBeforeKill} delivered at the kill; answers before it ${JSON.stringify(before)}; retries on the survivor ${JSON.stringify(tally(statuses))}; ` +
          `finals ${JSON.stringify(kinds)}; all settled ${settledMs} ms after the kill (${rounds.join(" ")}); ` +
          `${deliveries.size} texts delivered, none twice; ${received.length} message.created events on the survivor's subscriber`
      )
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 240_000)
})

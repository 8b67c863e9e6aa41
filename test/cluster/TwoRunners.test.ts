import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime, type Queue, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll } from "vitest"
import { freshDatabase } from "../support/Databases.ts"
import { type ServerProcess, spawnServer } from "../support/Processes.ts"
import { connectPusher, listen, next, subscribe } from "../support/PusherClient.ts"
import { createChannel, inbound } from "../messages/support.ts"
import { createCompany, request, type RunningServer, type TestServer } from "../support/TestServer.ts"

const platformKey = `cluster-platform-key-${Math.random().toString(36).slice(2)}`
const limit = 20
const shardsPerGroup = 300

const asTestServer = (p: ServerProcess): TestServer => ({ url: p.url, platformKey, close: async () => {} })

describe("one server process (embedded PGlite)", () => {
  it("starts from src/main.ts, serves the API and the realtime port, and stops on SIGTERM", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "crm-embedded-"))
    const env = { DATA_DIR: dataDir, PLATFORM_API_KEY: platformKey, DATABASE_URL: undefined, CLUSTER: undefined }
    let p: ServerProcess | undefined
    try {
      p = await spawnServer("embedded", env)
      const company = await createCompany(asTestServer(p))
      const me = await request(asTestServer(p), "GET", "/v1/me", { token: company.token })
      assert.strictEqual(me.status, 200)
      assert.strictEqual(me.body.data.current_company_id, company.id)
      const auth = await request(asTestServer(p), "POST", "/v1/broadcasting/auth", {
        token: company.token,
        body: { socket_id: "1.2", channel_name: `private-company.${company.id}` }
      })
      assert.strictEqual(auth.status, 200)
      // The gateway answers plain HTTP on its port with 404: it is up, and only speaks WebSocket.
      assert.strictEqual((await fetch(`http://127.0.0.1:${p.realtimePort}/`)).status, 404)
      const started = Date.now()
      await p.stop()
      assert.isBelow(Date.now() - started, 10_000, p.output())
    } finally {
      await p?.stop(1_000)
      rmSync(dataDir, { recursive: true, force: true })
    }
  }, 60_000)
})

const baseUrl = process.env.DATABASE_URL

describe.runIf(baseUrl)("two runners against one PostgreSQL", () => {
  let database: { readonly url: string; readonly drop: () => Promise<void> }
  let db: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown>
  const runners: Array<ServerProcess> = []
  const p = (i: 0 | 1) => runners[i]

  beforeAll(async () => {
    database = await freshDatabase(baseUrl!)
    db = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(database.url), maxConnections: 1 }).pipe(Layer.orDie))
    const env = {
      DATABASE_URL: database.url,
      CLUSTER: "socket",
      PLATFORM_API_KEY: platformKey,
      RATE_LIMIT_PER_WINDOW: String(limit),
      RATE_LIMIT_WINDOW_SECONDS: "60"
    }
    // One after the other: the first one runs the migrations on the empty database.
    runners.push(await spawnServer("runner-1", env))
    runners.push(await spawnServer("runner-2", env))
    // Shards move to the second runner once the first sees it join; an entity created before its
    // shard moves would start over on the new owner, so wait until each runner holds its share.
    const deadline = Date.now() + 30_000
    while (true) {
      const holders = await db.runPromise(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ pid: number; shards: number }>`
          SELECT pid, count(*)::int AS shards FROM pg_locks
          WHERE locktype = 'advisory' AND granted AND objsubid = 2
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          GROUP BY pid`
      }))
      const total = holders.reduce((sum, h) => sum + h.shards, 0)
      if (holders.length === 2 && total === shardsPerGroup) break
      if (Date.now() > deadline) {
        throw new Error(`shards never settled: ${JSON.stringify(holders)}\n${runners.map((r) => r.output()).join("\n")}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }, 120_000)

  afterAll(async () => {
    await Promise.all(runners.map((r) => r.stop()))
    await db?.dispose()
    await database?.drop()
  }, 60_000)

  it("holds one token's rate limit across both processes (the Company entity lives on one runner)", async () => {
    const company = await createCompany(asTestServer(p(0)))
    const answers: Array<{ status: number; remaining: string | null; via: string }> = []
    for (let i = 0; i <= limit + 1; i++) {
      const runner = p((i % 2) as 0 | 1)
      const res = await request(asTestServer(runner), "GET", "/v1/me", { token: company.token })
      answers.push({ status: res.status, remaining: res.headers.get("x-ratelimit-remaining"), via: runner.name })
      if (i === limit) {
        assert.strictEqual(res.status, 429)
        assert.strictEqual(res.body.message, "Too Many Requests.")
        assert.isAbove(Number(res.headers.get("retry-after")), 0)
      }
    }
    assert.deepStrictEqual(
      answers.map((a) => a.status),
      [...Array.from({ length: limit }, () => 200), 429, 429],
      JSON.stringify(answers)
    )
    // One bucket: the count goes down by one per request whichever process answers.
    assert.deepStrictEqual(
      answers.slice(0, limit).map((a) => Number(a.remaining)),
      Array.from({ length: limit }, (_, i) => limit - 1 - i)
    )
    // Another company's tokens are counted apart.
    const other = await createCompany(asTestServer(p(1)))
    assert.strictEqual((await request(asTestServer(p(0)), "GET", "/v1/me", { token: other.token })).status, 200)
  }, 30_000)

  it.live("delivers an event produced through one process to a pusher-js client on the other", () =>
    Effect.gen(function*() {
      const company = yield* Effect.promise(() => createCompany(asTestServer(p(0))))
      // Authorized by one process, connected to the other: both sign with the secret shared through app_settings.
      const onSecond = yield* connectPusher({
        realtimePort: p(1).realtimePort,
        appKey: "crm",
        apiUrl: p(0).url,
        token: company.token
      })
      const onFirst = yield* connectPusher({
        realtimePort: p(0).realtimePort,
        appKey: "crm",
        apiUrl: p(1).url,
        token: company.token
      })
      const secondChannel = yield* subscribe(onSecond, `private-company.${company.id}`)
      const firstChannel = yield* subscribe(onFirst, `private-company.${company.id}`)
      const onSecondEvents = yield* listen(secondChannel, "api_token.created")
      const onFirstEvents = yield* listen(firstChannel, "api_token.created")

      const created = yield* Effect.promise(() =>
        request(asTestServer(p(0)), "POST", "/v1/api-tokens", { token: company.token, body: { name: "made on runner 1" } })
      )
      assert.strictEqual(created.status, 201, JSON.stringify(created.body))
      const remote = (yield* next(onSecondEvents)) as { seq: number; event: string; company_id: number; data: unknown }
      assert.strictEqual(remote.event, "api_token.created")
      assert.strictEqual(remote.company_id, company.id)
      assert.deepStrictEqual(remote.data, { id: created.body.data.id, name: "made on runner 1" })
      const local = (yield* next(onFirstEvents)) as { seq: number }
      assert.strictEqual(local.seq, remote.seq)

      // And the other way round.
      const again = yield* Effect.promise(() =>
        request(asTestServer(p(1)), "POST", "/v1/api-tokens", { token: company.token, body: { name: "made on runner 2" } })
      )
      assert.strictEqual(again.status, 201)
      const back = (yield* next(onFirstEvents)) as { seq: number; data: unknown }
      assert.deepStrictEqual(back.data, { id: again.body.data.id, name: "made on runner 2" })
      assert.strictEqual(back.seq, remote.seq + 1)
      assert.strictEqual(((yield* next(onSecondEvents)) as { seq: number }).seq, back.seq)
    }), 30_000)

  it.live("delivers an event too big for a NOTIFY (multi-byte text) by id, identical on both runners", () =>
    Effect.gen(function*() {
      const company = yield* Effect.promise(() => createCompany(asTestServer(p(0))))
      const connect = (i: 0 | 1) =>
        connectPusher({ realtimePort: p(i).realtimePort, appKey: "crm", apiUrl: p(i).url, token: company.token })
      const events: Array<Queue.Queue<unknown>> = []
      for (const i of [0, 1] as const) {
        const channel = yield* subscribe(yield* connect(i), `private-company.${company.id}`)
        events.push(yield* listen(channel, "message.created"))
      }
      const server = asTestServer(p(0)) as RunningServer
      const channelId = yield* Effect.promise(() => createChannel(server, company.token, "msgr_b"))
      // 4,000 Cyrillic letters are 8,000 bytes: over PostgreSQL's NOTIFY cap, though fewer characters.
      for (const text of ["маленькое", "щ".repeat(4000)]) {
        const received = yield* Effect.promise(() => inbound(server, company.token, channelId, { text }))
        const local = (yield* next(events[0]!)) as { seq: number; occurred_at: string; data: any }
        const remote = (yield* next(events[1]!)) as { seq: number; occurred_at: string; data: any }
        assert.strictEqual(local.data.message.id, received.message_id)
        assert.strictEqual(remote.data.message.message_content, text)
        assert.deepStrictEqual(remote, local)
      }
    }), 30_000)
})

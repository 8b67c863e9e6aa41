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
import { createCompany, type Json, request, type RunningServer, type TestServer } from "../support/TestServer.ts"

const platformKey = `cluster-platform-key-${Math.random().toString(36).slice(2)}`
const limit = 3_000
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

  it("holds one token's limit exactly across both processes under 32 concurrent clients", async () => {
    const company = await createCompany(asTestServer(p(0)))
    let ok = 0
    let refused = 0
    const started = Date.now()
    const client = async (i: number) => {
      const runner = asTestServer(p((i % 2) as 0 | 1))
      while (ok < limit && Date.now() - started < 40_000) {
        const res = await request(runner, "GET", "/v1/me", { token: company.token })
        if (res.status === 429) refused += 1
        else {
          assert.strictEqual(res.status, 200)
          ok += 1
        }
      }
    }
    await Promise.all(Array.from({ length: 32 }, (_, i) => client(i)))
    // Everything ran well inside one window: every answer but a 429 counts against the same 3,000.
    assert.isBelow(Date.now() - started, 60_000)
    assert.strictEqual(ok, limit, `refused ${refused}`)
    // The 3,001st, on either process, is refused (slices left unspent went back or expired).
    for (const i of [0, 1] as const) {
      const res = await request(asTestServer(p(i)), "GET", "/v1/me", { token: company.token })
      assert.strictEqual(res.status, 429)
      assert.strictEqual(res.body.message, "Too Many Requests.")
      assert.strictEqual(res.headers.get("x-ratelimit-remaining"), "0")
      assert.isAbove(Number(res.headers.get("retry-after")), 0)
    }
    // Another company's tokens are counted apart.
    const other = await createCompany(asTestServer(p(1)))
    assert.strictEqual((await request(asTestServer(p(0)), "GET", "/v1/me", { token: other.token })).status, 200)
  }, 60_000)

  it("reports the remaining budget within one slice of the truth, whichever process answers", async () => {
    const company = await createCompany(asTestServer(p(0)))
    for (let i = 0; i < 40; i++) {
      const res = await request(asTestServer(p((i % 2) as 0 | 1)), "GET", "/v1/me", { token: company.token })
      assert.strictEqual(res.status, 200)
      const truth = limit - 1 - i
      // Slices start at 4 units and double while they run out fast: 40 requests see at most 16.
      assert.isAtMost(Math.abs(Number(res.headers.get("x-ratelimit-remaining")) - truth), 16, `request ${i}`)
    }
  })

  /** Polls `path` on `runner` with `token` until it answers `status`; how long that took. */
  const until = async (runner: 0 | 1, token: string, path: string, check: (res: Json) => boolean, withinMs: number) => {
    const started = Date.now()
    while (true) {
      const res = await request(asTestServer(p(runner)), "GET", path, { token })
      if (check(res)) return Date.now() - started
      if (Date.now() - started > withinMs) assert.fail(`${path} on ${p(runner).name} still answers ${res.status} ${JSON.stringify(res.body)}`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }

  const addPerson = async (companyId: number, role: "admin" | "manager" | "agent") => {
    const email = `person-${Math.random().toString(36).slice(2)}@example.test`
    const res = await request(asTestServer(p(0)), "POST", `/platform/v1/companies/${companyId}/users`, {
      token: platformKey,
      body: { email, password: "password-123", name: "Person", role }
    })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    const login = await request(asTestServer(p(0)), "POST", "/v1/auth/mobile/login", {
      body: { email, password: "password-123", device_name: "phone" }
    })
    assert.strictEqual(login.status, 200, JSON.stringify(login.body))
    return { id: res.body.data.user.id as number, email, token: login.body.data.token as string }
  }

  it("refuses a token revoked on one process on the other within a second", async () => {
    const company = await createCompany(asTestServer(p(0)))
    const made = await request(asTestServer(p(0)), "POST", "/v1/api-tokens", { token: company.token, body: { name: "leaked" } })
    assert.strictEqual(made.status, 201)
    const token = made.body.data.token as string
    // Resolved, and so cached, on both.
    for (const i of [0, 1] as const) assert.strictEqual((await request(asTestServer(p(i)), "GET", "/v1/me", { token })).status, 200)

    const revoked = await request(asTestServer(p(0)), "DELETE", `/v1/api-tokens/${made.body.data.id}`, { token: company.token })
    assert.strictEqual(revoked.status, 200, JSON.stringify(revoked.body))
    assert.strictEqual((await request(asTestServer(p(0)), "GET", "/v1/me", { token })).status, 401)
    await until(1, token, "/v1/me", (res) => res.status === 401, 1_000)
    // The company's other token is untouched.
    assert.strictEqual((await request(asTestServer(p(1)), "GET", "/v1/me", { token: company.token })).status, 200)
  })

  it("sees a role downgrade at once on the process that made it, and within a second on the other", async () => {
    const company = await createCompany(asTestServer(p(0)))
    const person = await addPerson(company.id, "admin")
    for (const i of [0, 1] as const) {
      const me = await request(asTestServer(p(i)), "GET", "/v1/me", { token: person.token })
      assert.deepStrictEqual(me.body.data.roles, ["admin"])
    }
    const changed = await request(asTestServer(p(0)), "POST", `/v1/companies/current/members/${person.id}/role`, {
      token: company.token,
      body: { role: "agent" }
    })
    assert.strictEqual(changed.status, 200, JSON.stringify(changed.body))
    const here = await request(asTestServer(p(0)), "GET", "/v1/me", { token: person.token })
    assert.deepStrictEqual(here.body.data.roles, ["agent"])
    // An admin-only endpoint is refused at once too.
    assert.strictEqual((await request(asTestServer(p(0)), "GET", "/v1/api-tokens", { token: person.token })).status, 403)
    await until(1, person.token, "/v1/me", (res) => res.body.data?.roles?.[0] === "agent", 1_000)
  })

  it.live("ends the subscriptions of a revoked token and of a changed password on the other process, with a 403", () =>
    Effect.gen(function*() {
      const company = yield* Effect.promise(() => createCompany(asTestServer(p(0))))
      const made = yield* Effect.promise(() =>
        request(asTestServer(p(0)), "POST", "/v1/api-tokens", { token: company.token, body: { name: "socket" } })
      )
      const person = yield* Effect.promise(() => addPerson(company.id, "agent"))
      // Connected to the second process, authorized through the first.
      const connect = (token: string) => connectPusher({ realtimePort: p(1).realtimePort, appKey: "crm", apiUrl: p(0).url, token })
      const channel = `private-company.${company.id}`
      const revokedChannel = yield* subscribe(yield* connect(made.body.data.token), channel)
      const revokedErrors = yield* listen(revokedChannel, "pusher:subscription_error")
      const personChannel = yield* subscribe(yield* connect(person.token), channel)
      const personErrors = yield* listen(personChannel, "pusher:subscription_error")
      const adminChannel = yield* subscribe(yield* connect(company.token), channel)
      const adminEvents = yield* listen(adminChannel, "api_token.deleted")

      const revoked = yield* Effect.promise(() =>
        request(asTestServer(p(0)), "DELETE", `/v1/api-tokens/${made.body.data.id}`, { token: company.token })
      )
      assert.strictEqual(revoked.status, 200)
      assert.strictEqual(((yield* next(revokedErrors)) as { status: number }).status, 403)
      // The admin's subscription stays and hears of the revocation.
      assert.strictEqual(((yield* next(adminEvents)) as { data: { id: number } }).data.id, made.body.data.id)

      const tablet = yield* Effect.promise(() =>
        request(asTestServer(p(0)), "POST", "/v1/auth/mobile/login", {
          body: { email: person.email, password: "password-123", device_name: "tablet" }
        })
      )
      const changed = yield* Effect.promise(() =>
        request(asTestServer(p(0)), "POST", "/v1/me/password", {
          token: tablet.body.data.token,
          body: { current_password: "password-123", password: "another-password-456" }
        })
      )
      assert.strictEqual(changed.status, 200, JSON.stringify(changed.body))
      assert.strictEqual(((yield* next(personErrors)) as { status: number }).status, 403)
      assert.strictEqual((yield* Effect.promise(() => request(asTestServer(p(1)), "GET", "/v1/me", { token: person.token }))).status, 401)
    }), 30_000)

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

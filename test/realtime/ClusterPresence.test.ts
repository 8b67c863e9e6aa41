import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime, Queue, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { createChannel, inbound } from "../messages/support.ts"
import { freshDatabase } from "../support/Databases.ts"
import { type ServerProcess, shardsSettled, spawnServer } from "../support/Processes.ts"
import { connectPusher, listen, next, type PusherClient, subscribe } from "../support/PusherClient.ts"
import { createCompany, request, type RunningServer, type TestServer } from "../support/TestServer.ts"

const platformKey = `presence-platform-key-${Math.random().toString(36).slice(2)}`
const baseUrl = process.env.DATABASE_URL

/** Presence and client events between two server processes on one PostgreSQL (server mode only). */
describe.runIf(baseUrl)("presence-conversation.{id} across two runners", () => {
  let database: { readonly url: string; readonly drop: () => Promise<void> }
  let db: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown>
  const runners: Array<ServerProcess> = []
  const server = (i: 0 | 1): TestServer => ({ url: runners[i].url, platformKey, close: async () => {} })

  beforeAll(async () => {
    database = await freshDatabase(baseUrl!)
    db = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(database.url), maxConnections: 1 }).pipe(Layer.orDie))
    const env = { DATABASE_URL: database.url, CLUSTER: "socket", PLATFORM_API_KEY: platformKey, METRICS_PORT: "0" }
    // One after the other: the first one runs the migrations on the empty database.
    runners.push(await spawnServer("runner-1", env))
    runners.push(await spawnServer("runner-2", env))
    await shardsSettled((text) =>
      db.runPromise(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql.unsafe<{ pid: number; shards: number }>(text)
      })))
  }, 180_000)

  afterAll(async () => {
    await Promise.all(runners.map((r) => r.stop()))
    await db?.dispose()
    await database?.drop()
  }, 60_000)

  /** A manager of the company, logged in on the mobile API: their id and token. */
  const manager = async (companyId: number) => {
    const email = `presence-${Date.now()}-${Math.random().toString(36).slice(2)}@example.test`
    const added = await request(server(0), "POST", `/platform/v1/companies/${companyId}/users`, {
      token: platformKey,
      body: { email, password: "password-123", name: "Other Runner", role: "manager" }
    })
    assert.strictEqual(added.status, 201, JSON.stringify(added.body))
    const login = await request(server(1), "POST", "/v1/auth/mobile/login", { body: { email, password: "password-123", device_name: "phone" } })
    return { id: added.body.data.user.id as number, token: login.body.data.token as string }
  }

  const connect = (i: 0 | 1, token: string) =>
    connectPusher({ realtimePort: runners[i].realtimePort, appKey: "crm", apiUrl: runners[i].url, token })

  type Members = { members: { count: number; get(id: string): { info: unknown } | null } }

  it.live("members and typing on one runner are seen by a client on the other; the last socket leaving removes the member", () =>
    Effect.gen(function*() {
      const company = yield* Effect.promise(() => createCompany(server(0)))
      const channelId = yield* Effect.promise(() => createChannel(server(0) as RunningServer, company.token, "msgr_b"))
      const received = yield* Effect.promise(() => inbound(server(0) as RunningServer, company.token, channelId))
      const adminId = (yield* Effect.promise(() => request(server(0), "GET", "/v1/me", { token: company.token }))).body.data.id as number
      const other = yield* Effect.promise(() => manager(company.id))
      const name = `presence-conversation.${received.conversation_id}`

      const admin = yield* connect(0, company.token)
      const adminChannel = yield* subscribe(admin, name)
      const added = yield* listen(adminChannel, "pusher:member_added")
      const removed = yield* listen(adminChannel, "pusher:member_removed")
      const adminTyping = yield* listen(adminChannel, "client-typing")

      const operator: PusherClient = yield* connect(1, other.token)
      const operatorChannel = yield* subscribe(operator, name)
      const joined = (yield* next(added)) as { id: string; info: { name: string } }
      assert.strictEqual(String(joined.id), String(other.id))
      assert.deepStrictEqual(joined.info, { name: "Other Runner" })
      // The admin joined on the other runner before: listed in the operator's members.
      const seen = operatorChannel as unknown as Members
      assert.strictEqual(seen.members.count, 2)
      assert.isNotNull(seen.members.get(String(adminId)))

      const operatorTyping = yield* listen(operatorChannel, "client-typing")
      assert.isTrue(operatorChannel.trigger("client-typing", { typing: true }))
      assert.deepStrictEqual(yield* next(adminTyping), { typing: true })
      assert.isTrue(adminChannel.trigger("client-typing", { typing: false }))
      assert.deepStrictEqual(yield* next(operatorTyping), { typing: false })
      yield* Effect.sleep("300 millis")
      assert.strictEqual(yield* Queue.size(operatorTyping), 0, "the sender does not hear itself")
      assert.strictEqual(yield* Queue.size(adminTyping), 0)

      // A second socket of the same operator on the first runner: still one member, not removed while one remains.
      const operatorHere = yield* connect(0, other.token)
      yield* subscribe(operatorHere, name)
      operator.unsubscribe(name)
      yield* Effect.sleep("500 millis")
      assert.strictEqual(yield* Queue.size(added), 0, "a member is added once")
      assert.strictEqual(yield* Queue.size(removed), 0, "a member with a socket left is not removed")
      operatorHere.disconnect()
      const left = (yield* next(removed)) as { id: string }
      assert.strictEqual(String(left.id), String(other.id))
    }), 60_000)

  it.live("another company's operator is refused the presence channel on either runner", () =>
    Effect.gen(function*() {
      const company = yield* Effect.promise(() => createCompany(server(0)))
      const channelId = yield* Effect.promise(() => createChannel(server(0) as RunningServer, company.token, "msgr_b"))
      const received = yield* Effect.promise(() => inbound(server(0) as RunningServer, company.token, channelId))
      const stranger = yield* Effect.promise(() => createCompany(server(1)))
      for (const i of [0, 1] as const) {
        const auth = yield* Effect.promise(() =>
          request(server(i), "POST", "/v1/broadcasting/auth", {
            token: stranger.token,
            body: { socket_id: "1.2", channel_name: `presence-conversation.${received.conversation_id}` }
          })
        )
        assert.strictEqual(auth.status, 403)
      }
    }), 30_000)
})

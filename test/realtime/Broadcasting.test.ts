import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue } from "effect"
import { SqlClient } from "effect/sql"
import { createHmac } from "node:crypto"
import { afterAll, beforeAll } from "vitest"
import { Tokens } from "../../src/auth/Tokens.ts"
import { Events } from "../../src/events/Events.ts"
import { randomToken, sha256 } from "../../src/platform/Crypto.ts"
import { addUser, mobileLogin } from "../auth/support.ts"
import { connectPusher, listen, next, subscribe } from "../support/PusherClient.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const authorize = (token: string, body: Record<string, string>) =>
  request(server, "POST", "/v1/broadcasting/auth", { token, body })

const authorizeForm = (token: string, body: Record<string, string>) =>
  request(server, "POST", "/v1/broadcasting/auth", {
    token,
    raw: new URLSearchParams(body).toString(),
    headers: { "content-type": "application/x-www-form-urlencoded" }
  })

const userIdOf = async (token: string): Promise<number> => (await request(server, "GET", "/v1/me", { token })).body.data.id

/** A bearer token for the company's service account with only the given abilities. */
const tokenWithAbilities = (companyId: number, abilities: ReadonlyArray<string>) =>
  server.runInApp(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const secret = randomToken(40)
    const [{ id }] = yield* sql<{ id: number }>`
      INSERT INTO api_tokens (user_id, company_id, kind, name, secret_hash, abilities)
      SELECT user_id, company_id, 'service', 'limited', ${sha256(secret)}, ${abilities as Array<string>}
      FROM api_tokens WHERE company_id = ${companyId} AND kind = 'service' ORDER BY id LIMIT 1
      RETURNING id`
    return `${id}|${secret}`
  }))

/** Emits in a transaction of its own and answers the event as numbered (the company's newest). */
const emit = (companyId: number, key: string, payload: unknown) =>
  server.runInApp(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events
    yield* sql.withTransaction(events.emit(companyId, key, payload))
    const all = yield* events.replay(companyId, 0, 500)
    return all[all.length - 1]!
  }))

const emitThenRollBack = (companyId: number, key: string, payload: unknown) =>
  server.runInApp(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events
    const outcome = yield* sql.withTransaction(Effect.gen(function*() {
      yield* events.emit(companyId, key, payload)
      return yield* Effect.fail("rolled back" as const)
    })).pipe(Effect.flip)
    assert.strictEqual(outcome, "rolled back")
  }))

const appSecret = () =>
  server.runInApp(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [{ value }] = yield* sql<{ value: string }>`SELECT value FROM app_settings WHERE key = 'pusher_app_secret'`
    return value
  }).pipe(Effect.orDie))

const lastSeq = (companyId: number) =>
  server.runInApp(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [{ event_seq }] = yield* sql<{ event_seq: number }>`SELECT event_seq FROM companies WHERE id = ${companyId}`
    return event_seq
  }))

describe("POST /v1/broadcasting/auth", () => {
  it("signs the active company's channel and the caller's own user channel, from JSON or a form", async () => {
    const a = await createCompany(server)
    const channel = `private-company.${a.id}`
    const json = await authorize(a.token, { socket_id: "123.456", channel_name: channel })
    assert.strictEqual(json.status, 200)
    assert.deepStrictEqual(Object.keys(json.body).sort(), ["auth", "channel_data"])
    assert.match(json.body.auth, new RegExp(`^${server.pusherAppKey}:[0-9a-f]{64}$`))
    // The grant names its user, and the signature covers that name.
    const me = await userIdOf(a.token)
    assert.deepStrictEqual(JSON.parse(json.body.channel_data), { user_id: me })
    assert.strictEqual(
      json.body.auth,
      `${server.pusherAppKey}:${createHmac("sha256", await appSecret()).update(`123.456:${channel}:${json.body.channel_data}`).digest("hex")}`
    )

    const form = await authorizeForm(a.token, { socket_id: "123.456", channel_name: channel })
    assert.strictEqual(form.status, 200)
    assert.strictEqual(form.body.auth, json.body.auth)

    const otherSocket = await authorize(a.token, { socket_id: "123.457", channel_name: channel })
    assert.notStrictEqual(otherSocket.body.auth, json.body.auth)

    const own = await authorize(a.token, { socket_id: "1.2", channel_name: `private-user.${me}` })
    assert.strictEqual(own.status, 200)
    assert.match(own.body.auth, /^[^:]+:[0-9a-f]{64}$/)
  })

  it("refuses another company's channel, another user's channel and unknown channel kinds with 403", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const bUser = await userIdOf(b.token)
    const refused = [
      `private-company.${b.id}`,
      `private-user.${bUser}`,
      `private-company.${a.id}0`,
      `presence-company.${a.id}`,
      `private-encrypted-company.${a.id}`,
      `company.${a.id}`,
      "private-contacts.1"
    ]
    for (const channel_name of refused) {
      const res = await authorize(a.token, { socket_id: "1.2", channel_name })
      assert.strictEqual(res.status, 403, channel_name)
      assert.isString(res.body.message, channel_name)
      assert.isUndefined(res.body.auth)
    }
    const form = await authorizeForm(a.token, { socket_id: "1.2", channel_name: `private-company.${b.id}` })
    assert.strictEqual(form.status, 403)
  })

  it("answers 422 with field errors for a malformed socket id or channel name, 401 without credentials", async () => {
    const a = await createCompany(server)
    const badSocket = await authorize(a.token, { socket_id: "abc", channel_name: `private-company.${a.id}` })
    assert.strictEqual(badSocket.status, 422)
    assert.deepStrictEqual(Object.keys(badSocket.body.errors), ["socket_id"])

    const badChannel = await authorizeForm(a.token, { socket_id: "1.2", channel_name: "private company!" })
    assert.strictEqual(badChannel.status, 422)
    assert.deepStrictEqual(Object.keys(badChannel.body.errors), ["channel_name"])

    const missing = await authorize(a.token, {})
    assert.strictEqual(missing.status, 422)
    assert.sameMembers(Object.keys(missing.body.errors), ["socket_id", "channel_name"])

    const anonymous = await request(server, "POST", "/v1/broadcasting/auth", {
      body: { socket_id: "1.2", channel_name: `private-company.${a.id}` }
    })
    assert.strictEqual(anonymous.status, 401)
  })

  it("needs the broadcasting:connect ability (or *) on a token", async () => {
    const a = await createCompany(server)
    const channel_name = `private-company.${a.id}`
    const without = await tokenWithAbilities(a.id, ["contacts:read"])
    const res = await authorize(without, { socket_id: "1.2", channel_name })
    assert.strictEqual(res.status, 403)
    assert.strictEqual(res.body.message, "This token lacks the broadcasting:connect ability.")

    const withConnect = await tokenWithAbilities(a.id, ["broadcasting:connect"])
    assert.strictEqual((await authorize(withConnect, { socket_id: "1.2", channel_name })).status, 200)
  })

  it("follows the person's active company: a company that is no longer active gives 403", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const token = await server.runInApp(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`INSERT INTO memberships (company_id, user_id, role) VALUES (${b.id}, ${a.admin.id}, 'agent')`
      yield* sql`UPDATE users SET current_company_id = ${a.id} WHERE id = ${a.admin.id}`
      const tokens = yield* Tokens
      return (yield* tokens.issueMobileToken(a.admin.id, "broadcasting-test")).plaintext
    }))
    const channelA = `private-company.${a.id}`
    const channelB = `private-company.${b.id}`
    assert.strictEqual((await authorize(token, { socket_id: "1.2", channel_name: channelA })).status, 200)
    assert.strictEqual((await authorize(token, { socket_id: "1.2", channel_name: channelB })).status, 403)
    assert.strictEqual((await authorize(token, { socket_id: "1.2", channel_name: `private-user.${a.admin.id}` })).status, 200)

    // Switched through the API, which drops the credential this runner resolved a moment ago.
    const switched = await request(server, "PUT", "/v1/me/current-company", { token, body: { company_id: b.id } })
    assert.strictEqual(switched.status, 200, JSON.stringify(switched.body))
    assert.strictEqual((await authorize(token, { socket_id: "1.2", channel_name: channelA })).status, 403)
    assert.strictEqual((await authorize(token, { socket_id: "1.2", channel_name: channelB })).status, 200)
  })

  it("accepts the cabinet session (with its XSRF header)", async () => {
    const a = await createCompany(server)
    const sessionId = randomToken(40)
    const csrf = randomToken(40)
    await server.runInApp(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO sessions (id, user_id, csrf_token, expires_at)
        VALUES (${sessionId}, ${a.admin.id}, ${csrf}, now() + interval '1 hour')`
    }))
    const body = { socket_id: "1.2", channel_name: `private-company.${a.id}` }
    const cookie = `crm_session=${sessionId}`
    const ok = await request(server, "POST", "/v1/broadcasting/auth", { body, headers: { cookie, "x-xsrf-token": csrf } })
    assert.strictEqual(ok.status, 200)
    assert.isString(ok.body.auth)
    const noXsrf = await request(server, "POST", "/v1/broadcasting/auth", { body, headers: { cookie } })
    assert.strictEqual(noXsrf.status, 419)
  })
})

describe("realtime delivery through pusher-js", () => {
  const connect = (token: string) =>
    connectPusher({ realtimePort: server.realtimePort, appKey: server.pusherAppKey, apiUrl: server.url, token })

  it.live("delivers committed events of the active company, never rolled-back ones", () =>
    Effect.gen(function*() {
      const a = yield* Effect.promise(() => createCompany(server))
      const client = yield* connect(a.token)
      const channel = yield* subscribe(client, `private-company.${a.id}`)
      const created = yield* listen(channel, "contact.created")
      const before = yield* Effect.promise(() => lastSeq(a.id))

      yield* Effect.promise(() => emitThenRollBack(a.id, "contact.created", { id: 1, marker: "rolled back" }))
      const committed = yield* Effect.promise(() => emit(a.id, "contact.created", { id: 2, marker: "committed" }))

      const received = (yield* next(created)) as Record<string, unknown>
      assert.deepStrictEqual(received, {
        id: committed.id,
        seq: committed.seq,
        event: "contact.created",
        company_id: a.id,
        occurred_at: committed.occurred_at,
        data: { id: 2, marker: "committed" }
      })
      assert.match(committed.id, /^evt_\d+$/)
      // The rolled-back write took no sequence number either.
      assert.strictEqual(committed.seq, before + 1)
      assert.strictEqual(yield* Queue.size(created), 0)
    }))

  it.live("refuses another company's channel and leaks nothing of it; client events are rejected", () =>
    Effect.gen(function*() {
      const a = yield* Effect.promise(() => createCompany(server))
      const b = yield* Effect.promise(() => createCompany(server))
      const client = yield* connect(a.token)

      const foreign = client.subscribe(`private-company.${b.id}`)
      const refused = yield* listen(foreign, "pusher:subscription_error")
      const leaked = yield* listen(foreign, "contact.created")
      const error = (yield* next(refused)) as { type: string; status: number }
      assert.strictEqual(error.type, "AuthError")
      assert.strictEqual(error.status, 403)
      assert.isFalse(foreign.subscribed)

      const own = yield* subscribe(client, `private-company.${a.id}`)
      const ownEvents = yield* listen(own, "contact.created")
      const everything = yield* listen(client, "contact.created")

      const errors = yield* listen(client.connection, "error")
      own.trigger("client-typing", { user: 1 })
      const rejected = (yield* next(errors)) as { type: string; data: { code: number } }
      assert.strictEqual(rejected.type, "PusherError")
      assert.strictEqual(rejected.data.code, 4301)

      yield* Effect.promise(() => emit(b.id, "contact.created", { secret: "of company B" }))
      yield* Effect.promise(() => emit(a.id, "contact.created", { mine: true }))
      // Frames on one socket arrive in publish order: once A's later event is in, a leak of B's would be too.
      assert.deepStrictEqual(((yield* next(ownEvents)) as { data: unknown }).data, { mine: true })
      assert.strictEqual(yield* Queue.size(leaked), 0)
      assert.strictEqual(yield* Queue.size(ownEvents), 0)
      // The global binding sees every event on every channel of this client: only A's.
      const seen = (yield* Queue.takeAll(everything)) as ReadonlyArray<{ company_id: number }>
      assert.deepStrictEqual(seen.map((e) => e.company_id), [a.id])
    }))

  it.live("sends an event naming a user to that user's channel too", () =>
    Effect.gen(function*() {
      const a = yield* Effect.promise(() => createCompany(server))
      const me = yield* Effect.promise(() => userIdOf(a.token))
      const client = yield* connect(a.token)
      const mine = yield* subscribe(client, `private-user.${me}`)
      const assigned = yield* listen(mine, "message.created")

      yield* Effect.promise(() => emit(a.id, "message.created", { id: 7, user_id: me + 1000000 }))
      const event = yield* Effect.promise(() => emit(a.id, "message.created", { id: 8, user_id: me }))
      const received = (yield* next(assigned)) as { seq: number; data: unknown }
      assert.strictEqual(received.seq, event.seq)
      assert.deepStrictEqual(received.data, { id: 8, user_id: me })
    }))

  it.live("ends a removed member's open subscription to the company channel, and only theirs", () =>
    Effect.gen(function*() {
      const a = yield* Effect.promise(() => createCompany(server))
      const agent = yield* Effect.promise(() => addUser(server, a.id, { role: "agent" }))
      const login = yield* Effect.promise(() => mobileLogin(server, agent.email, agent.password))
      const agentClient = yield* connect(login.body.data.token)
      const agentChannel = yield* subscribe(agentClient, `private-company.${a.id}`)
      const agentEvents = yield* listen(agentChannel, "contact.created")
      const agentRevoked = yield* listen(agentChannel, "pusher:subscription_error")
      const adminChannel = yield* subscribe(yield* connect(a.token), `private-company.${a.id}`)
      const adminEvents = yield* listen(adminChannel, "contact.created")
      const adminRemoved = yield* listen(adminChannel, "member.removed")

      yield* Effect.promise(() => emit(a.id, "contact.created", { before: true }))
      assert.deepStrictEqual(((yield* next(agentEvents)) as { data: unknown }).data, { before: true })
      assert.deepStrictEqual(((yield* next(adminEvents)) as { data: unknown }).data, { before: true })

      const revoked = yield* Effect.promise(() =>
        request(server, "POST", `/v1/companies/current/members/${agent.id}/revoke`, { token: a.token })
      )
      assert.strictEqual(revoked.status, 200, JSON.stringify(revoked.body))
      assert.deepStrictEqual(((yield* next(adminRemoved)) as { data: unknown }).data, { id: agent.id })
      const error = (yield* next(agentRevoked)) as { type: string; status: number }
      assert.strictEqual(error.status, 403)

      yield* Effect.promise(() => emit(a.id, "contact.created", { after: true }))
      assert.deepStrictEqual(((yield* next(adminEvents)) as { data: unknown }).data, { after: true })
      assert.strictEqual(yield* Queue.size(agentEvents), 0)
      // And a new subscription is refused at the auth endpoint.
      const again = yield* Effect.promise(() =>
        authorize(login.body.data.token, { socket_id: "9.9", channel_name: `private-company.${a.id}` })
      )
      assert.notStrictEqual(again.status, 200)
    }))
})

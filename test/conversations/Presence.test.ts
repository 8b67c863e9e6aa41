import { assert, describe, it } from "@effect/vitest"
import { Effect, Queue } from "effect"
import { afterAll, beforeAll } from "vitest"
import { conversationOn } from "../messages/support.ts"
import { connectPusher, listen, next, type PusherClient, subscribe } from "../support/PusherClient.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { agentIn } from "./support.ts"

let server: RunningServer
// Building a server (migrations on PGlite) is slow on a loaded machine.
beforeAll(async () => {
  server = await startServer()
}, 300_000)
afterAll(() => server?.close())

const connect = (token: string) =>
  connectPusher({ realtimePort: server.realtimePort, appKey: server.pusherAppKey, apiUrl: server.url, token })

const userIdOf = async (token: string) => (await request(server, "GET", "/v1/me", { token })).body.data.id as number

/** The refusal of a subscription, as pusher-js reports it. */
const refused = (client: PusherClient, name: string) =>
  Effect.gen(function*() {
    const channel = client.subscribe(name)
    const failed = yield* listen(channel, "pusher:subscription_error")
    return (yield* next(failed)) as { status: number }
  })

describe("presence-conversation.{id}", () => {
  it.live("shows who is looking at a conversation and relays typing to the others only", () =>
    Effect.gen(function*() {
      const a = yield* Effect.promise(() => createCompany(server))
      const c = yield* Effect.promise(() => conversationOn(server, a.token))
      const agent = yield* Effect.promise(() => agentIn(server, a.id, [c.channelId]))
      const adminId = yield* Effect.promise(() => userIdOf(a.token))
      const name = `presence-conversation.${c.conversationId}`

      const admin = yield* connect(a.token)
      const adminChannel = yield* subscribe(admin, name)
      const added = yield* listen(adminChannel, "pusher:member_added")
      const removed = yield* listen(adminChannel, "pusher:member_removed")
      const adminTyping = yield* listen(adminChannel, "client-typing")
      const members = adminChannel as unknown as { members: { count: number; me: { id: string } } }
      assert.strictEqual(members.members.count, 1)
      assert.strictEqual(String(members.members.me.id), String(adminId))

      const operator = yield* connect(agent.token)
      const operatorChannel = yield* subscribe(operator, name)
      const joined = (yield* next(added)) as { id: string; info: { name: string } }
      assert.strictEqual(String(joined.id), String(agent.id))
      assert.deepStrictEqual(joined.info, { name: "Person" })
      const seen = operatorChannel as unknown as { members: { count: number; get(id: string): { info: unknown } | null } }
      assert.strictEqual(seen.members.count, 2)
      assert.isNotNull(seen.members.get(String(adminId)))

      const operatorTyping = yield* listen(operatorChannel, "client-typing")
      assert.isTrue(operatorChannel.trigger("client-typing", { typing: true }))
      assert.deepStrictEqual(yield* next(adminTyping), { typing: true })
      yield* Effect.sleep("200 millis")
      assert.strictEqual(yield* Queue.size(operatorTyping), 0, "the sender does not hear itself")

      operator.unsubscribe(name)
      const left = (yield* next(removed)) as { id: string }
      assert.strictEqual(String(left.id), String(agent.id))
    }))

  it.live("rate-limits client events per socket", () =>
    Effect.gen(function*() {
      const a = yield* Effect.promise(() => createCompany(server))
      const c = yield* Effect.promise(() => conversationOn(server, a.token))
      const agent = yield* Effect.promise(() => agentIn(server, a.id, [c.channelId]))
      const name = `presence-conversation.${c.conversationId}`
      const admin = yield* connect(a.token)
      const adminChannel = yield* subscribe(admin, name)
      const typing = yield* listen(adminChannel, "client-typing")
      const operator = yield* connect(agent.token)
      const operatorChannel = yield* subscribe(operator, name)
      const errors = yield* listen(operator.connection, "error")
      for (let i = 0; i < 25; i++) operatorChannel.trigger("client-typing", { i })
      const error = (yield* next(errors)) as { data: { code: number } }
      assert.strictEqual(error.data.code, 4301)
      yield* Effect.sleep("300 millis")
      const relayed = yield* Queue.size(typing)
      assert.isAtLeast(relayed, 10)
      assert.isBelow(relayed, 25)
    }))

  it.live("refuses operators without access to the conversation's channel and other companies", () =>
    Effect.gen(function*() {
      const a = yield* Effect.promise(() => createCompany(server))
      const b = yield* Effect.promise(() => createCompany(server))
      const c = yield* Effect.promise(() => conversationOn(server, a.token))
      const blind = yield* Effect.promise(() => agentIn(server, a.id, []))
      const name = `presence-conversation.${c.conversationId}`
      const refusal = yield* refused(yield* connect(blind.token), name)
      assert.strictEqual(refusal.status, 403)
      const foreign = yield* refused(yield* connect(b.token), name)
      assert.strictEqual(foreign.status, 403)
      const direct = yield* Effect.promise(() =>
        request(server, "POST", "/v1/broadcasting/auth", { token: b.token, body: { socket_id: "1.2", channel_name: name } })
      )
      assert.strictEqual(direct.status, 403)
      assert.isUndefined(direct.body.auth)
      const missing = yield* Effect.promise(() =>
        request(server, "POST", "/v1/broadcasting/auth", { token: a.token, body: { socket_id: "1.2", channel_name: "presence-conversation.999999999" } })
      )
      assert.strictEqual(missing.status, 403)
      const granted = yield* Effect.promise(() =>
        request(server, "POST", "/v1/broadcasting/auth", { token: a.token, body: { socket_id: "1.2", channel_name: name } })
      )
      assert.strictEqual(granted.status, 200)
      const data = JSON.parse(granted.body.channel_data)
      assert.strictEqual(data.user_id, yield* Effect.promise(() => userIdOf(a.token)))
      assert.isString(data.user_info.name)
    }))
})

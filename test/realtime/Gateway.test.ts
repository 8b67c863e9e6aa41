import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Layer, Option, Queue, Scope } from "effect"
import WebSocket from "ws"
import { RealtimeGateway } from "../../src/realtime/Gateway.ts"
import * as Protocol from "../../src/realtime/Pusher.ts"
import { loadNativeUws } from "../../src/realtime/UwsTransport.ts"
import { listen, Pusher, type PusherClient } from "../support/PusherClient.ts"

const APP_KEY = "crm-test-key"
const APP_SECRET = "crm-test-secret"
const WAIT = "3 seconds"
// CI runs this file once per engine: REALTIME_ENGINE=ws, and =uws where the native build loads.
const expectedEngine = process.env.REALTIME_ENGINE === "ws" || !("uws" in loadNativeUws()) ? "ws" : "uws"

const next = <A>(inbox: Queue.Queue<A>) => Queue.take(inbox).pipe(Effect.timeout(WAIT))

const eventually = <A>(effect: Effect.Effect<A>, predicate: (a: A) => boolean) =>
  Effect.gen(function*() {
    while (true) {
      const value = yield* effect
      if (predicate(value)) return value
      yield* Effect.sleep("10 millis")
    }
  }).pipe(Effect.timeout(WAIT))

const connectPusher = Effect.fnUntraced(function*(options: {
  readonly key?: string
  readonly signedChannel?: (requested: string) => string
} = {}) {
  const { port } = yield* RealtimeGateway
  const signedChannel = options.signedChannel ?? ((requested: string) => requested)
  const client = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new Pusher(options.key ?? APP_KEY, {
        cluster: "local",
        wsHost: "127.0.0.1",
        wsPort: port,
        forceTLS: false,
        enabledTransports: ["ws"],
        disableStats: true,
        channelAuthorization: {
          customHandler: ({ channelName, socketId }, callback) =>
            callback(null, { auth: Protocol.authFor(APP_KEY, APP_SECRET, socketId, signedChannel(channelName)) })
        }
      })
    ),
    (client) => Effect.sync(() => client.disconnect())
  )
  return client
})

const connected = (client: PusherClient) =>
  Effect.gen(function*() {
    const inbox = yield* listen(client.connection, "connected")
    if (client.connection.state !== "connected") yield* next(inbox)
    return client.connection.socket_id
  })

const subscribe = (client: PusherClient, name: string) =>
  Effect.gen(function*() {
    const channel = client.subscribe(name)
    const succeeded = yield* listen(channel, "pusher:subscription_succeeded")
    if (!channel.subscribed) yield* next(succeeded)
    return channel
  })

interface Frame {
  readonly event: string
  readonly channel?: string
  readonly data?: unknown
}

const dataOf = (frame: Frame): unknown => JSON.parse(frame.data as string)

const rawAt = Effect.fnUntraced(function*(port: number, path: string) {
  const inbox = yield* Queue.unbounded<Frame>()
  const closed = yield* Deferred.make<{ readonly code: number; readonly reason: string }>()
  const ws = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`)
      ws.on("message", (data) => {
        Queue.offerUnsafe(inbox, JSON.parse(data.toString()) as Frame)
      })
      ws.on("close", (code, reason) => {
        Deferred.doneUnsafe(closed, Exit.succeed({ code, reason: reason.toString() }))
      })
      ws.on("error", () => {})
      return ws
    }),
    (ws) => Effect.sync(() => ws.terminate())
  )
  return { ws, inbox, closed }
})

const connectRaw = (path: string) =>
  Effect.gen(function*() {
    const { port } = yield* RealtimeGateway
    return yield* rawAt(port, path)
  })

const pusherPath = `/app/${APP_KEY}?protocol=7&client=js&version=8.6.0&flash=false`

const establishedAt = Effect.fnUntraced(function*(port: number) {
  const client = yield* rawAt(port, pusherPath)
  const established = yield* next(client.inbox)
  assert.strictEqual(established.event, "pusher:connection_established")
  const { socket_id } = dataOf(established) as { socket_id: string }
  return { ...client, socketId: socket_id }
})

const connectRawEstablished = () =>
  Effect.gen(function*() {
    const { port } = yield* RealtimeGateway
    return yield* establishedAt(port)
  })

const rawSubscribe = Effect.fnUntraced(function*(
  client: { readonly ws: WebSocket; readonly inbox: Queue.Queue<Frame>; readonly socketId: string },
  channel: string,
  auth: string = Protocol.authFor(APP_KEY, APP_SECRET, client.socketId, channel)
) {
  client.ws.send(JSON.stringify({ event: "pusher:subscribe", data: { channel, auth } }))
  return yield* next(client.inbox)
})

describe("Pusher protocol helpers", () => {
  it("signs like the Pusher reference example", () => {
    assert.strictEqual(
      Protocol.authFor("278d425bdf160c739803", "7ad3773142a6692b25b8", "1234.1234", "private-foobar"),
      "278d425bdf160c739803:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4"
    )
  })

  it("verifies only the exact key, socket and channel", () => {
    const auth = Protocol.authFor(APP_KEY, APP_SECRET, "1.2", "private-company.1")
    assert.isTrue(Protocol.verify(APP_KEY, APP_SECRET, "1.2", "private-company.1", auth))
    assert.isFalse(Protocol.verify(APP_KEY, APP_SECRET, "1.2", "private-company.2", auth))
    assert.isFalse(Protocol.verify(APP_KEY, APP_SECRET, "1.3", "private-company.1", auth))
    assert.isFalse(Protocol.verify(APP_KEY, "other-secret", "1.2", "private-company.1", auth))
    assert.isFalse(Protocol.verify(APP_KEY, APP_SECRET, "1.2", "private-company.1", auth.replace(APP_KEY, "other")))
    assert.isFalse(Protocol.verify(APP_KEY, APP_SECRET, "1.2", "private-company.1", ""))
  })

  it("binds a grant to its channel_data: another user id does not verify, and the decision names the user", () => {
    const data = Protocol.channelDataFor(7)
    const auth = Protocol.authFor(APP_KEY, APP_SECRET, "1.2", "private-company.1", data)
    assert.deepStrictEqual(Protocol.authorizeSubscription(APP_KEY, APP_SECRET, "1.2", "private-company.1", auth, data), {
      _tag: "Granted",
      userId: 7
    })
    const forged = Protocol.authorizeSubscription(APP_KEY, APP_SECRET, "1.2", "private-company.1", auth, Protocol.channelDataFor(8))
    assert.strictEqual(forged._tag, "Refused")
    assert.strictEqual(Protocol.authorizeSubscription(APP_KEY, APP_SECRET, "1.2", "private-company.1", auth)._tag, "Refused")
  })

  it("makes socket ids of the Pusher shape", () => {
    const ids = new Set(Array.from({ length: 100 }, Protocol.makeSocketId))
    assert.strictEqual(ids.size, 100)
    for (const id of ids) assert.isTrue(Protocol.isSocketId(id), id)
  })

  it("double-encodes server event data", () => {
    const frame = JSON.parse(Protocol.channelEvent("private-company.1", "message.created", { body: "a \"quoted\" é" }))
    assert.deepStrictEqual(frame, {
      event: "message.created",
      channel: "private-company.1",
      data: "{\"body\":\"a \\\"quoted\\\" é\"}"
    })
  })

  it("decodes client frames defensively", () => {
    assert.deepStrictEqual(Protocol.decodeClientMessage("{\"event\":\"pusher:ping\",\"data\":{}}"), { _tag: "Ping" })
    assert.deepStrictEqual(
      Protocol.decodeClientMessage("{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"private-a\",\"auth\":\"k:s\"}}"),
      { _tag: "Subscribe", channel: "private-a", auth: "k:s", channelData: undefined }
    )
    assert.deepStrictEqual(
      Protocol.decodeClientMessage(
        "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"private-a\",\"auth\":\"k:s\",\"channel_data\":\"{\\\"user_id\\\":7}\"}}"
      ),
      { _tag: "Subscribe", channel: "private-a", auth: "k:s", channelData: "{\"user_id\":7}" }
    )
    assert.deepStrictEqual(Protocol.decodeClientMessage("{\"event\":\"client-typing\",\"channel\":\"private-a\"}"), {
      _tag: "ClientEvent",
      event: "client-typing",
      channel: "private-a",
      data: undefined
    })
    for (const garbage of ["", "nope", "[]", "null", "{\"event\":42}", "{\"event\":\"pusher:subscribe\",\"data\":\"x\"}"]) {
      assert.deepStrictEqual(Protocol.decodeClientMessage(garbage), { _tag: "Malformed" }, garbage)
    }
  })
})

layer(RealtimeGateway.layer({ host: "127.0.0.1", port: 0, appKey: APP_KEY, appSecret: APP_SECRET }), {
  excludeTestServices: true
})("RealtimeGateway", (it) => {
  it.effect(`listens on an ephemeral port with the ${expectedEngine} engine (REALTIME_ENGINE=${process.env.REALTIME_ENGINE ?? "auto"})`, () =>
    Effect.gen(function*() {
      const gateway = yield* RealtimeGateway
      assert.isAbove(gateway.port, 0)
      assert.strictEqual(gateway.engine, expectedEngine)
    }))

  it.effect("pusher-js receives connection_established with a socket id", () =>
    Effect.gen(function*() {
      const client = yield* connectPusher()
      const socketId = yield* connected(client)
      assert.isTrue(Protocol.isSocketId(socketId), socketId)

      const raw = yield* connectRaw(pusherPath)
      const established = yield* next(raw.inbox)
      assert.strictEqual(established.event, "pusher:connection_established")
      assert.isString(established.data)
      const data = dataOf(established) as { socket_id: string; activity_timeout: number }
      assert.isTrue(Protocol.isSocketId(data.socket_id))
      assert.notStrictEqual(data.socket_id, socketId)
      assert.strictEqual(data.activity_timeout, 120)
    }))

  it.effect("a valid private subscription receives published events intact", () =>
    Effect.gen(function*() {
      const gateway = yield* RealtimeGateway
      const client = yield* connectPusher()
      yield* connected(client)
      const channel = yield* subscribe(client, "private-company.1")
      const messages = yield* listen(channel, "message.created")

      const payload = {
        id: 42,
        body: "Hello \"world\" — ünïcødé ✓\n<script>",
        nested: { tags: ["a", "b"], nothing: null, ok: true, amount: 12.5 }
      }
      yield* gateway.publish("private-company.1", "message.created", payload)
      assert.deepStrictEqual(yield* next(messages), payload)

      yield* gateway.publish("private-company.1", "message.created", "plain string")
      assert.strictEqual(yield* next(messages), "plain string")
    }))

  it.effect("published frames of every length encoding arrive intact, in order with the socket's own replies", () =>
    Effect.gen(function*() {
      const gateway = yield* RealtimeGateway
      const client = yield* connectRawEstablished()
      const channel = "private-company.7"
      assert.strictEqual((yield* rawSubscribe(client, channel)).event, "pusher_internal:subscription_succeeded")
      // Two-byte characters: a frame length counted in characters instead of bytes would cut them.
      for (const size of [1, 200, 70_000]) {
        yield* gateway.publish(channel, "message.created", { text: "é".repeat(size) })
        client.ws.send(JSON.stringify({ event: "pusher:ping", data: {} }))
        const frame = yield* next(client.inbox)
        assert.strictEqual(frame.event, "message.created")
        assert.deepStrictEqual(dataOf(frame), { text: "é".repeat(size) })
        assert.strictEqual((yield* next(client.inbox)).event, "pusher:pong")
      }
    }))

  it.effect("a subscription signed for another channel is refused and gets nothing from it", () =>
    Effect.gen(function*() {
      const gateway = yield* RealtimeGateway
      const intruder = yield* connectPusher({ signedChannel: () => "private-company.1" })
      const member = yield* connectPusher()
      yield* Effect.all([connected(intruder), connected(member)])

      const stolen = intruder.subscribe("private-company.2")
      const refused = yield* listen(stolen, "pusher:subscription_error")
      const leaked = yield* listen(stolen, "message.created")
      const error = (yield* next(refused)) as { type: string; status: number; error: string }
      assert.strictEqual(error.type, "AuthError")
      assert.strictEqual(error.status, 401)
      assert.isFalse(stolen.subscribed)

      const own = yield* subscribe(intruder, "private-company.1")
      const ownMessages = yield* listen(own, "message.created")
      const memberChannel = yield* subscribe(member, "private-company.2")
      const memberMessages = yield* listen(memberChannel, "message.created")

      yield* gateway.publish("private-company.2", "message.created", { secret: "company 2" })
      yield* gateway.publish("private-company.1", "message.created", { mine: true })

      assert.deepStrictEqual(yield* next(memberMessages), { secret: "company 2" })
      // Frames on one socket arrive in publish order, so once the later company 1 event is in,
      // a leaked company 2 event would already be too.
      assert.deepStrictEqual(yield* next(ownMessages), { mine: true })
      assert.strictEqual(yield* Queue.size(leaked), 0)
    }))

  it.effect("public, presence and encrypted channels are refused even with a valid signature", () =>
    Effect.gen(function*() {
      const gateway = yield* RealtimeGateway
      const client = yield* connectRawEstablished()
      for (const channel of ["company.1", "presence-company.1", "private-encrypted-company.1", "private-bad name"]) {
        const reply = yield* rawSubscribe(client, channel)
        assert.strictEqual(reply.event, "pusher:subscription_error", channel)
        assert.strictEqual(reply.channel, channel)
        assert.strictEqual((dataOf(reply) as { status: number }).status, 403, channel)
        yield* gateway.publish(channel, "message.created", { leaked: channel })
      }
      const ok = yield* rawSubscribe(client, "private-company.9")
      assert.deepStrictEqual(ok, { event: "pusher_internal:subscription_succeeded", channel: "private-company.9", data: "{}" })
      yield* gateway.publish("private-company.9", "message.created", { ok: true })
      const delivered = yield* next(client.inbox)
      assert.strictEqual(delivered.channel, "private-company.9")
      assert.deepStrictEqual(dataOf(delivered), { ok: true })
    }))

  it.effect("unsubscribe stops delivery", () =>
    Effect.gen(function*() {
      const gateway = yield* RealtimeGateway
      const client = yield* connectRawEstablished()
      yield* rawSubscribe(client, "private-company.3")
      yield* rawSubscribe(client, "private-company.4")
      client.ws.send(JSON.stringify({ event: "pusher:unsubscribe", data: { channel: "private-company.3" } }))
      client.ws.send(JSON.stringify({ event: "pusher:ping", data: {} }))
      assert.strictEqual((yield* next(client.inbox)).event, "pusher:pong")

      yield* gateway.publish("private-company.3", "message.created", { gone: true })
      yield* gateway.publish("private-company.4", "message.created", { kept: true })
      const delivered = yield* next(client.inbox)
      assert.strictEqual(delivered.channel, "private-company.4")
    }))

  it.effect("client events are rejected and never relayed", () =>
    Effect.gen(function*() {
      const gateway = yield* RealtimeGateway
      const sender = yield* connectPusher()
      const receiver = yield* connectPusher()
      yield* Effect.all([connected(sender), connected(receiver)])
      const senderChannel = yield* subscribe(sender, "private-company.1")
      const receiverChannel = yield* subscribe(receiver, "private-company.1")
      const relayed = yield* listen(receiverChannel, "client-typing")
      const serverEvents = yield* listen(receiverChannel, "message.created")
      const senderErrors = yield* listen(sender.connection, "error")

      senderChannel.trigger("client-typing", { user: 1 })
      const error = (yield* next(senderErrors)) as { type: string; data: { code: number; message: string } }
      assert.strictEqual(error.type, "PusherError")
      assert.strictEqual(error.data.code, 4301)
      assert.strictEqual(error.data.message, "Client events are not enabled")

      yield* gateway.publish("private-company.1", "message.created", { after: true })
      assert.deepStrictEqual(yield* next(serverEvents), { after: true })
      assert.strictEqual(yield* Queue.size(relayed), 0)
      assert.strictEqual(sender.connection.state, "connected")
    }))

  it.effect("a wrong app key is refused with 4001", () =>
    Effect.gen(function*() {
      const raw = yield* connectRaw("/app/not-our-key?protocol=7&client=js&version=8.6.0")
      const first = yield* next(raw.inbox)
      assert.strictEqual(first.event, "pusher:error")
      assert.strictEqual((dataOf(first) as { code: number }).code, 4001)
      const closed = yield* Deferred.await(raw.closed).pipe(Effect.timeout(WAIT))
      assert.strictEqual(closed.code, 4001)

      const client = yield* connectPusher({ key: "not-our-key" })
      const errors = yield* listen(client.connection, "error")
      const states = yield* listen(client.connection, "state_change")
      const error = (yield* next(errors)) as { error: { data: { code: number } } }
      assert.strictEqual(error.error.data.code, 4001)
      const reached = yield* eventually(Effect.sync(() => client.connection.state), (state) => state === "disconnected")
      assert.strictEqual(reached, "disconnected")
      const seen = (yield* Queue.clear(states)) as Array<{ current: string }>
      assert.isFalse(seen.some((change) => change.current === "connected"))
    }))

  it.effect("answers pusher:ping and survives garbage frames", () =>
    Effect.gen(function*() {
      const client = yield* connectRawEstablished()
      client.ws.send("not json at all")
      client.ws.send(Buffer.from([0, 1, 2, 255]), { binary: true })
      client.ws.send("{\"event\":42}")
      client.ws.send("{\"event\":\"pusher:subscribe\",\"data\":\"private-company.1\"}")
      client.ws.send("{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":7}}")
      client.ws.send("{\"event\":\"pusher:signin\",\"data\":{}}")
      client.ws.send("{\"event\":\"pusher:ping\",\"data\":{}}")
      assert.deepStrictEqual(yield* next(client.inbox), { event: "pusher:pong", data: "{}" })
      assert.isFalse(yield* Deferred.isDone(client.closed))
    }))

  it.effect("an oversized inbound frame closes only that socket", () =>
    Effect.gen(function*() {
      const bystander = yield* connectRawEstablished()
      const abuser = yield* connectRawEstablished()
      abuser.ws.send(JSON.stringify({ event: "pusher:ping", data: { pad: "x".repeat(20 * 1024) } }))
      yield* Deferred.await(abuser.closed).pipe(Effect.timeout(WAIT))
      bystander.ws.send("{\"event\":\"pusher:ping\",\"data\":{}}")
      assert.strictEqual((yield* next(bystander.inbox)).event, "pusher:pong")
    }))

  it.effect("counts open connections and forgets closed ones", () =>
    Effect.gen(function*() {
      const gateway = yield* RealtimeGateway
      // Clients of earlier tests in this block were closed with their scopes; wait for the server to see it.
      yield* eventually(gateway.connections, (n) => n === 0)
      const a = yield* connectRawEstablished()
      const b = yield* connectRawEstablished()
      assert.strictEqual(yield* gateway.connections, 2)
      a.ws.close()
      b.ws.terminate()
      yield* eventually(gateway.connections, (n) => n === 0)
      const refused = yield* connectRaw("/app/not-our-key")
      yield* Deferred.await(refused.closed).pipe(Effect.timeout(WAIT))
      assert.strictEqual(yield* gateway.connections, 0)
    }))
})

layer(
  RealtimeGateway.layer({
    host: "127.0.0.1",
    port: 0,
    appKey: APP_KEY,
    appSecret: APP_SECRET,
    maxBackpressureBytes: 64 * 1024
  }),
  { excludeTestServices: true }
)("RealtimeGateway backpressure", (it) => {
  it.effect("closes a consumer that stops reading with 4100 and keeps serving the others", () =>
    Effect.gen(function*() {
      const gateway = yield* RealtimeGateway
      const slow = yield* connectRawEstablished()
      const healthy = yield* connectRawEstablished()
      yield* rawSubscribe(slow, "private-company.1")
      yield* rawSubscribe(healthy, "private-company.1")
      slow.ws.pause()

      const body = "x".repeat(16 * 1024)
      let published = 0
      // Kernel socket buffers absorb a few MB before uWS starts buffering, hence the generous bound.
      while ((yield* gateway.connections) === 2 && published < 4000) {
        yield* gateway.publish("private-company.1", "message.created", { n: published, body })
        published++
        yield* Effect.sleep("1 millis")
      }
      assert.strictEqual(yield* gateway.connections, 1, `still 2 connections after ${published} publishes`)

      yield* gateway.publish("private-company.1", "message.created", { n: published, body: "last" })
      let last: Frame | undefined
      while (last === undefined || (dataOf(last) as { n: number }).n !== published) {
        last = yield* next(healthy.inbox)
      }
      assert.isFalse(yield* Deferred.isDone(healthy.closed))

      slow.ws.resume()
      const closed = yield* Deferred.await(slow.closed).pipe(Effect.timeout("10 seconds"))
      assert.strictEqual(closed.code, 4100)
    }), { timeout: 30_000 })
})

describe("RealtimeGateway lifecycle", () => {
  it.live("closing the scope ends sockets with 4200 and frees the port", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        RealtimeGateway.layer({ host: "127.0.0.1", port: 0, appKey: APP_KEY, appSecret: APP_SECRET }),
        scope
      )
      const { port } = Context.get(context, RealtimeGateway)
      const client = yield* establishedAt(port)

      yield* Scope.close(scope, Exit.void)
      const closed = yield* Deferred.await(client.closed).pipe(Effect.timeout(WAIT))
      assert.strictEqual(closed.code, 4200)

      const late = yield* rawAt(port, pusherPath)
      const lateClose = yield* Deferred.await(late.closed).pipe(Effect.timeout(WAIT))
      assert.strictEqual(lateClose.code, 1006)
      assert.isTrue(Option.isNone(yield* Queue.poll(late.inbox)))
    }))

  it.live("serves under a path prefix like pusher-js wsPath", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
      const context = yield* Layer.buildWithScope(
        RealtimeGateway.layer({ host: "127.0.0.1", port: 0, appKey: APP_KEY, appSecret: APP_SECRET, path: "/realtime/" }),
        scope
      )
      const { port } = Context.get(context, RealtimeGateway)
      const prefixed = yield* rawAt(port, `/realtime${pusherPath}`)
      assert.strictEqual((yield* next(prefixed.inbox)).event, "pusher:connection_established")
      const documented = yield* rawAt(port, `/realtime/v1/realtime${pusherPath}`)
      assert.strictEqual((yield* next(documented.inbox)).event, "pusher:connection_established")
      const unprefixed = yield* rawAt(port, pusherPath)
      const closed = yield* Deferred.await(unprefixed.closed).pipe(Effect.timeout(WAIT))
      assert.strictEqual(closed.code, 1006)
    }))
})

import { Config, Context, Effect, Layer, Schema } from "effect"
import * as Pusher from "./Pusher.ts"
import type { Transport, TransportSocket } from "./Transport.ts"
import { loadNativeUws, makeUwsTransport } from "./UwsTransport.ts"
import { WsTransport } from "./WsTransport.ts"

export interface RealtimeGatewayOptions {
  readonly host?: string
  readonly port: number
  readonly appKey: string
  readonly appSecret: string
  readonly maxBackpressureBytes?: number
  /** Prefix before `/app/:key`, the same as pusher-js `wsPath`. */
  readonly path?: string
  /** Overrides `REALTIME_ENGINE` (auto | uws | ws). */
  readonly engine?: EngineChoice
}

export type RealtimeEngine = "uws" | "ws" | "disabled"

/** `auto`: native uWebSockets.js where it loads, else `ws`. `uws` refuses to start without the native build. */
export const EngineChoice = Schema.Literals(["auto", "uws", "ws"])
export type EngineChoice = typeof EngineChoice.Type

interface Connection {
  readonly socketId: string
  readonly appKeyMatches: boolean
  /** Subscribed channels, each with the user its grant named (null for a grant without `channel_data`). */
  readonly channels: Map<string, number | null>
}

type Socket = TransportSocket<Connection>

const MAX_PAYLOAD_BYTES = 16 * 1024
const DEFAULT_MAX_BACKPRESSURE_BYTES = 1024 * 1024
// Idleness counts from the last inbound frame. pusher-js pings after `activity_timeout` of silence
// and waits 30 s for the pong; the transport also sends protocol pings near the deadline (answered by browsers).
const IDLE_TIMEOUT_SECONDS = Pusher.ACTIVITY_TIMEOUT_SECONDS + 32

const selectTransport = Effect.fnUntraced(function*(choice: EngineChoice) {
  if (choice === "ws") return WsTransport
  const native = loadNativeUws()
  if ("uws" in native) return makeUwsTransport(native.uws)
  if (choice === "uws") return yield* Effect.die(new Error(`REALTIME_ENGINE=uws, but ${native.reason}`))
  yield* Effect.logInfo("realtime: native uWebSockets.js unavailable, using ws").pipe(Effect.annotateLogs({ reason: native.reason }))
  return WsTransport
})

export class RealtimeGateway extends Context.Service<RealtimeGateway, {
  readonly port: number
  readonly engine: RealtimeEngine
  publish(channel: string, event: string, data: unknown): Effect.Effect<void>
  /** Ends the subscriptions to `channel` granted to `userId` (a member removed from the company), with a subscription error. */
  revoke(channel: string, userId: number): Effect.Effect<void>
  readonly connections: Effect.Effect<number>
}>()("crm/realtime/RealtimeGateway") {
  /** REALTIME_DISABLED: no WebSocket listener; publishes go nowhere. */
  static readonly disabled: Layer.Layer<RealtimeGateway> = Layer.succeed(RealtimeGateway, {
    port: 0,
    engine: "disabled",
    publish: () => Effect.void,
    revoke: () => Effect.void,
    connections: Effect.succeed(0)
  })

  static readonly layer = (options: RealtimeGatewayOptions): Layer.Layer<RealtimeGateway> =>
    Layer.effect(
      RealtimeGateway,
      Effect.gen(function*() {
        const choice = options.engine ?? (yield* Config.schema(EngineChoice, "REALTIME_ENGINE").pipe(Config.withDefault("auto" as const), Effect.orDie))
        const transport: Transport = yield* selectTransport(choice)
        const engine = transport.engine
        const { appKey, appSecret } = options
        const softCap = options.maxBackpressureBytes ?? DEFAULT_MAX_BACKPRESSURE_BYTES
        const prefix = (options.path ?? "").replace(/\/+$/, "")
        const sockets = new Set<Socket>()
        const subscribers = new Map<string, Set<Socket>>()
        let closing = false

        const unsubscribe = (ws: Socket, connection: Connection, channel: string) => {
          if (!connection.channels.delete(channel)) return
          ws.unsubscribe(channel)
          const set = subscribers.get(channel)
          if (set === undefined) return
          set.delete(ws)
          if (set.size === 0) subscribers.delete(channel)
        }

        const subscribe = (ws: Socket, connection: Connection, channel: string, auth: string | undefined, channelData: string | undefined) => {
          const decision = Pusher.authorizeSubscription(appKey, appSecret, connection.socketId, channel, auth, channelData)
          if (decision._tag === "Refused") {
            ws.send(Pusher.subscriptionError(channel, decision.status, decision.error))
            return
          }
          if (!connection.channels.has(channel)) {
            connection.channels.set(channel, decision.userId)
            ws.subscribe(channel)
            const set = subscribers.get(channel)
            if (set === undefined) subscribers.set(channel, new Set([ws]))
            else set.add(ws)
          }
          ws.send(Pusher.subscriptionSucceeded(channel))
        }

        const onMessage = (ws: Socket, text: string): void => {
          const connection = ws.data
          const message = Pusher.decodeClientMessage(text)
          switch (message._tag) {
            case "Ping":
              ws.send(Pusher.pong)
              return
            case "Subscribe":
              return subscribe(ws, connection, message.channel, message.auth, message.channelData)
            case "Unsubscribe":
              return unsubscribe(ws, connection, message.channel)
            case "ClientEvent":
              ws.send(Pusher.error(Pusher.ErrorCode.ClientEventRejected, "Client events are not enabled"))
              return
            case "Other":
            case "Malformed":
              return
          }
        }

        // Stock pusher-js and Echo connect at `/app/{key}`; ARCHITECTURE.md names `/v1/realtime`
        // (clients set `wsPath: "/v1/realtime"`). Both are served.
        const listening = yield* Effect.acquireRelease(
          Effect.tryPromise({
            try: () =>
              transport.listen<Connection>({
                host: options.host,
                port: options.port,
                roots: [...new Set([prefix, `${prefix}/v1/realtime`])],
                maxPayloadBytes: MAX_PAYLOAD_BYTES,
                // Two limits on purpose: `publish` ends sockets over `softCap` with 4100 (pusher-js backs off and
                // reconnects); the close frame still has to fit under the transport's own limit, which is the hard stop.
                maxBackpressureBytes: softCap * 2,
                idleTimeoutSeconds: IDLE_TIMEOUT_SECONDS,
                accept: (key) => closing ? undefined : { socketId: Pusher.makeSocketId(), appKeyMatches: key === appKey, channels: new Map() },
                open: (ws) => {
                  if (!ws.data.appKeyMatches) {
                    // Sent in-band as well because pusher-js reads the handshake's first frame before the close code.
                    ws.send(Pusher.error(Pusher.ErrorCode.AppNotFound, "Application does not exist"))
                    ws.end(Pusher.ErrorCode.AppNotFound, "Application does not exist")
                    return
                  }
                  sockets.add(ws)
                  ws.send(Pusher.connectionEstablished(ws.data.socketId))
                },
                message: onMessage,
                close: (ws) => {
                  if (!sockets.delete(ws)) return
                  for (const channel of ws.data.channels.keys()) {
                    const set = subscribers.get(channel)
                    if (set === undefined) continue
                    set.delete(ws)
                    if (set.size === 0) subscribers.delete(channel)
                  }
                }
              }),
            catch: (error) => error
          }).pipe(Effect.orDie),
          (listening) =>
            Effect.sync(() => {
              closing = true
              listening.close()
              for (const ws of [...sockets]) ws.end(Pusher.ErrorCode.Reconnect, "Server shutting down")
            })
        )
        const port = listening.port

        const publish = Effect.fnUntraced(function*(channel: string, event: string, data: unknown) {
          const set = subscribers.get(channel)
          if (set === undefined) return
          const message = Pusher.channelEvent(channel, event, data)
          let slow: Array<Socket> | undefined
          for (const ws of set) {
            if (ws.bufferedAmount() > softCap) (slow ??= []).push(ws)
          }
          if (slow !== undefined) {
            const socketIds = slow.map((ws) => ws.data.socketId)
            for (const ws of slow) ws.end(Pusher.ErrorCode.OverCapacity, "Over capacity")
            yield* Effect.logWarning("RealtimeGateway closed slow consumers").pipe(
              Effect.annotateLogs({ channel, socketIds, maxBackpressureBytes: softCap })
            )
          }
          listening.publish(channel, message, set)
        })

        const revoke = (channel: string, userId: number) =>
          Effect.sync(() => {
            const set = subscribers.get(channel)
            if (set === undefined) return
            for (const ws of [...set]) {
              const connection = ws.data
              if (connection.channels.get(channel) !== userId) continue
              unsubscribe(ws, connection, channel)
              ws.send(Pusher.subscriptionError(channel, 403, "Access to this channel was revoked."))
            }
          })

        yield* Effect.logInfo("RealtimeGateway listening").pipe(Effect.annotateLogs({ port, engine }))

        return RealtimeGateway.of({
          port,
          engine,
          publish,
          revoke,
          connections: Effect.sync(() => sockets.size)
        })
      })
    )
}

import uWS from "@trufflesuite/uws-js-unofficial"
import type { us_listen_socket, WebSocket } from "@trufflesuite/uws-js-unofficial"
import { Context, Effect, Layer } from "effect"
import * as Pusher from "./Pusher.ts"

export interface RealtimeGatewayOptions {
  readonly host?: string
  readonly port: number
  readonly appKey: string
  readonly appSecret: string
  readonly maxBackpressureBytes?: number
  /** Prefix before `/app/:key`, the same as pusher-js `wsPath`. */
  readonly path?: string
}

export type RealtimeEngine = "uws" | "ws-fallback" | "disabled"

interface Connection {
  readonly socketId: string
  readonly appKeyMatches: boolean
  /** Subscribed channels, each with the user its grant named (null for a grant without `channel_data`). */
  readonly channels: Map<string, number | null>
}

type Socket = WebSocket<Connection>

// The package swaps in a `ws`-based shim, with only a console warning, when no native binary matches the
// Node ABI; the shim exports just `App`, `_cfg` and the two `us_*` helpers.
const engine: RealtimeEngine = typeof (uWS as { readonly SSLApp?: unknown }).SSLApp === "function" ? "uws" : "ws-fallback"

const MAX_PAYLOAD_BYTES = 16 * 1024
const DEFAULT_MAX_BACKPRESSURE_BYTES = 1024 * 1024
// uWS measures idleness from the last inbound frame. pusher-js pings after `activity_timeout` of silence
// and waits 30 s for the pong; uWS also sends protocol pings near the deadline (answered by browsers).
// uWS wants a multiple of 4.
const IDLE_TIMEOUT_SECONDS = Pusher.ACTIVITY_TIMEOUT_SECONDS + 32

export class RealtimeGateway extends Context.Service<RealtimeGateway, {
  readonly port: number
  readonly engine: RealtimeEngine
  publish(channel: string, event: string, data: unknown): Effect.Effect<void>
  /** Ends the subscriptions to `channel` granted to `userId` (a member removed from the company), with a subscription error. */
  revoke(channel: string, userId: number): Effect.Effect<void>
  readonly connections: Effect.Effect<number>
}>()("crm/realtime/RealtimeGateway") {
  /** REALTIME_DISABLED: no WebSocket listener (e.g. under Deno, where the uWS addon cannot load); publishes go nowhere. */
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
        if (engine !== "uws") {
          // The shim has no upgrade handlers, route parameters, query strings or pub/sub, and its
          // upgrade path throws inside an event emitter: fail at startup rather than crash on first connect.
          return yield* Effect.die(
            new Error(
              `RealtimeGateway needs native uWebSockets.js, but @trufflesuite/uws-js-unofficial loaded its ws fallback (UWS_USE_FALLBACK set, or no binary for Node ${process.version} ABI ${process.versions.modules} ${process.platform}-${process.arch})`
            )
          )
        }
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
            ws.send(Pusher.subscriptionError(channel, decision.status, decision.error), false)
            return
          }
          if (!connection.channels.has(channel)) {
            connection.channels.set(channel, decision.userId)
            ws.subscribe(channel)
            const set = subscribers.get(channel)
            if (set === undefined) subscribers.set(channel, new Set([ws]))
            else set.add(ws)
          }
          ws.send(Pusher.subscriptionSucceeded(channel), false)
        }

        const onMessage = (ws: Socket, text: string) => {
          const connection = ws.getUserData()
          const message = Pusher.decodeClientMessage(text)
          switch (message._tag) {
            case "Ping":
              ws.send(Pusher.pong, false)
              return
            case "Subscribe":
              return subscribe(ws, connection, message.channel, message.auth, message.channelData)
            case "Unsubscribe":
              return unsubscribe(ws, connection, message.channel)
            case "ClientEvent":
              ws.send(Pusher.error(Pusher.ErrorCode.ClientEventRejected, "Client events are not enabled"), false)
              return
            case "Other":
            case "Malformed":
              return
          }
        }

        const behavior: uWS.WebSocketBehavior<Connection> = {
          compression: uWS.DISABLED,
          maxPayloadLength: MAX_PAYLOAD_BYTES,
          // Two limits on purpose: `publish` ends sockets over `softCap` with 4100 (pusher-js backs off and
          // reconnects); the close frame still has to fit under uWS's own limit, which is the hard stop.
          // Past it uWS would drop messages silently, so it closes instead.
          maxBackpressure: softCap * 2,
          closeOnBackpressureLimit: 1,
          idleTimeout: IDLE_TIMEOUT_SECONDS,
          sendPingsAutomatically: true,
          upgrade: (res, req, context) => {
            if (closing) {
              res.writeStatus("503 Service Unavailable").end()
              return
            }
            res.upgrade<Connection>(
              { socketId: Pusher.makeSocketId(), appKeyMatches: req.getParameter(0) === appKey, channels: new Map() },
              req.getHeader("sec-websocket-key"),
              req.getHeader("sec-websocket-protocol"),
              req.getHeader("sec-websocket-extensions"),
              context
            )
          },
          open: (ws) => {
            const connection = ws.getUserData()
            if (!connection.appKeyMatches) {
              // Sent in-band as well because pusher-js reads the handshake's first frame before the close code.
              ws.send(Pusher.error(Pusher.ErrorCode.AppNotFound, "Application does not exist"), false)
              ws.end(Pusher.ErrorCode.AppNotFound, "Application does not exist")
              return
            }
            sockets.add(ws)
            ws.send(Pusher.connectionEstablished(connection.socketId), false)
          },
          message: (ws, message, isBinary) => {
            if (isBinary) return
            onMessage(ws, Buffer.from(message).toString("utf8"))
          },
          close: (ws) => {
            if (!sockets.delete(ws)) return
            const connection = ws.getUserData()
            for (const channel of connection.channels.keys()) {
              const set = subscribers.get(channel)
              if (set === undefined) continue
              set.delete(ws)
              if (set.size === 0) subscribers.delete(channel)
            }
          }
        }
        // Stock pusher-js and Echo connect at `/app/{key}`; ARCHITECTURE.md names `/v1/realtime`
        // (clients set `wsPath: "/v1/realtime"`). Both are served.
        const app = uWS.App()
        for (const root of new Set([prefix, `${prefix}/v1/realtime`])) app.ws<Connection>(`${root}/app/:key`, behavior)
        app.any("/*", (res) => {
          res.writeStatus("404 Not Found").end()
        })

        const listenSocket = yield* Effect.acquireRelease(
          Effect.callback<us_listen_socket>((resume) => {
            const onListen = (token: us_listen_socket | false) =>
              resume(
                token === false
                  ? Effect.die(new Error(`RealtimeGateway could not listen on ${options.host ?? "*"}:${options.port}`))
                  : Effect.succeed(token)
              )
            if (options.host === undefined) app.listen(options.port, onListen)
            else app.listen(options.host, options.port, onListen)
          }),
          (token) =>
            Effect.sync(() => {
              closing = true
              uWS.us_listen_socket_close(token)
              for (const ws of [...sockets]) {
                ws.end(Pusher.ErrorCode.Reconnect, "Server shutting down")
              }
            })
        )
        const port = uWS.us_socket_local_port(listenSocket)

        const publish = Effect.fnUntraced(function*(channel: string, event: string, data: unknown) {
          const set = subscribers.get(channel)
          if (set === undefined) return
          const message = Pusher.channelEvent(channel, event, data)
          let slow: Array<Socket> | undefined
          for (const ws of set) {
            if (ws.getBufferedAmount() > softCap) (slow ??= []).push(ws)
          }
          if (slow !== undefined) {
            const socketIds = slow.map((ws) => ws.getUserData().socketId)
            for (const ws of slow) ws.end(Pusher.ErrorCode.OverCapacity, "Over capacity")
            yield* Effect.logWarning("RealtimeGateway closed slow consumers").pipe(
              Effect.annotateLogs({ channel, socketIds, maxBackpressureBytes: softCap })
            )
          }
          app.publish(channel, message, false)
        })

        const revoke = (channel: string, userId: number) =>
          Effect.sync(() => {
            const set = subscribers.get(channel)
            if (set === undefined) return
            for (const ws of [...set]) {
              const connection = ws.getUserData()
              if (connection.channels.get(channel) !== userId) continue
              unsubscribe(ws, connection, channel)
              ws.send(Pusher.subscriptionError(channel, 403, "Access to this channel was revoked."), false)
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

import { Clock, Config, Context, Effect, Layer, Schema } from "effect"
import { ClusterPresence, type PresenceBus } from "./ClusterPresence.ts"
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
  /** Presence members and client events shared with the other runners; without it they stay on this runner. */
  readonly bus?: PresenceBus
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
  /** The client-event allowance of this socket. */
  bucket: Pusher.Bucket
}

/** A presence channel's members on this runner: each user once, however many sockets they joined with. */
type Members = Map<number, { readonly info: unknown; sockets: number }>

type Socket = TransportSocket<Connection>

const MAX_PAYLOAD_BYTES = 16 * 1024

/**
 * A channel of more subscribers than SCAN_ALWAYS has their buffered bytes read on one publish in
 * SCAN_EVERY: on uWS each read is a call into the addon, thousands per publish on a company channel.
 * A slow consumer then passes the soft cap by at most SCAN_EVERY - 1 frames before it is closed with
 * 4100; the transport's own limit (twice the cap) stops it in any case.
 */
const SCAN_ALWAYS = 64
const SCAN_EVERY = 8
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
        const unscanned = new WeakMap<Set<Socket>, number>()
        let closing = false

        const presence = new Map<string, Members>()
        const clock = yield* Clock.Clock

        const toOthers = (channel: string, except: Socket | undefined, text: string) => {
          for (const other of subscribers.get(channel) ?? []) if (other !== except) other.send(text)
        }

        // Members on the other runners; what they announce reaches this runner's subscribers as if local.
        const cluster = options.bus === undefined ? undefined : yield* ClusterPresence.make(options.bus, {
          localMembers: () => [...presence].flatMap(([channel, members]) => [...members].map(([userId, m]) => ({ channel, userId, info: m.info }))),
          isLocal: (channel, userId) => presence.get(channel)?.has(userId) === true,
          deliver: (channel, text) => toOthers(channel, undefined, text)
        })
        const membersOf = (channel: string): Array<Pusher.PresenceMember> => {
          const local = [...(presence.get(channel) ?? [])].map(([userId, m]) => ({ userId, userInfo: m.info }))
          const remote = cluster?.members(channel).filter((m) => presence.get(channel)?.has(m.userId) !== true) ?? []
          return [...local, ...remote]
        }

        const leave = (ws: Socket, channel: string, userId: number | null | undefined) => {
          const members = presence.get(channel)
          const member = userId == null ? undefined : members?.get(userId)
          if (members === undefined || member === undefined || userId == null) return
          member.sockets -= 1
          if (member.sockets > 0) return
          members.delete(userId)
          if (members.size === 0) presence.delete(channel)
          cluster?.announce({ op: "leave", c: channel, u: userId })
          if (cluster?.present(channel, userId) !== true) toOthers(channel, ws, Pusher.memberRemoved(channel, userId))
        }

        const join = (ws: Socket, channel: string, userId: number, info: unknown) => {
          const members = presence.get(channel) ?? new Map()
          presence.set(channel, members)
          const member = members.get(userId)
          if (member !== undefined) {
            member.sockets += 1
          } else {
            const elsewhere = cluster?.present(channel, userId) === true
            members.set(userId, { info, sockets: 1 })
            cluster?.announce({ op: "join", c: channel, u: userId, i: info })
            if (!elsewhere) toOthers(channel, ws, Pusher.memberAdded(channel, { userId, userInfo: info }))
          }
          ws.send(Pusher.presenceSucceeded(channel, membersOf(channel)))
        }

        const unsubscribe = (ws: Socket, connection: Connection, channel: string) => {
          const userId = connection.channels.get(channel)
          if (!connection.channels.delete(channel)) return
          ws.unsubscribe(channel)
          const set = subscribers.get(channel)
          if (set !== undefined) {
            set.delete(ws)
            if (set.size === 0) subscribers.delete(channel)
          }
          if (Pusher.isPresence(channel)) leave(ws, channel, userId)
        }

        const subscribe = (ws: Socket, connection: Connection, channel: string, auth: string | undefined, channelData: string | undefined) => {
          const decision = Pusher.authorizeSubscription(appKey, appSecret, connection.socketId, channel, auth, channelData)
          if (decision._tag === "Refused") {
            ws.send(Pusher.subscriptionError(channel, decision.status, decision.error))
            return
          }
          const fresh = !connection.channels.has(channel)
          if (fresh) {
            connection.channels.set(channel, decision.userId)
            ws.subscribe(channel)
            const set = subscribers.get(channel)
            if (set === undefined) subscribers.set(channel, new Set([ws]))
            else set.add(ws)
          }
          if (Pusher.isPresence(channel) && decision.userId !== null) {
            if (fresh) join(ws, channel, decision.userId, decision.userInfo)
            else ws.send(Pusher.presenceSucceeded(channel, membersOf(channel)))
            return
          }
          ws.send(Pusher.subscriptionSucceeded(channel))
        }

        // Client events travel only between the members of a presence channel the sender is in, never back to it.
        const relay = (ws: Socket, connection: Connection, message: { readonly event: string; readonly channel: string | undefined; readonly data: unknown }) => {
          const channel = message.channel
          const userId = channel === undefined ? undefined : connection.channels.get(channel)
          if (channel === undefined || !Pusher.isPresence(channel) || userId == null) {
            ws.send(Pusher.error(Pusher.ErrorCode.ClientEventRejected, "Client events are not enabled"))
            return
          }
          const taken = Pusher.takeToken(connection.bucket, clock.currentTimeMillisUnsafe())
          connection.bucket = taken.bucket
          if (!taken.allowed) {
            ws.send(Pusher.error(Pusher.ErrorCode.ClientEventRejected, "Client event rejected: over the rate limit"))
            return
          }
          toOthers(channel, ws, Pusher.clientEvent(channel, message.event, message.data, userId))
          if (cluster?.hasRemote(channel) === true) cluster.announce({ op: "client", c: channel, e: message.event, d: message.data ?? null, u: userId })
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
              return relay(ws, connection, message)
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
                accept: (key) =>
                  closing ? undefined : {
                    socketId: Pusher.makeSocketId(),
                    appKeyMatches: key === appKey,
                    channels: new Map(),
                    bucket: { tokens: Pusher.clientEventLimit.burst, at: clock.currentTimeMillisUnsafe() }
                  },
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
                  for (const [channel, userId] of ws.data.channels) {
                    const set = subscribers.get(channel)
                    if (set !== undefined) {
                      set.delete(ws)
                      if (set.size === 0) subscribers.delete(channel)
                    }
                    if (Pusher.isPresence(channel)) leave(ws, channel, userId)
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
          const skipped = unscanned.get(set) ?? 0
          const scan = set.size <= SCAN_ALWAYS || skipped + 1 >= SCAN_EVERY
          unscanned.set(set, scan ? 0 : skipped + 1)
          let slow: Array<Socket> | undefined
          if (scan) {
            for (const ws of set) {
              if (ws.bufferedAmount() > softCap) (slow ??= []).push(ws)
            }
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

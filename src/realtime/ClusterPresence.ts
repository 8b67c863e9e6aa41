import { Clock, Effect, Option, PubSub, Queue, Schema, type Scope } from "effect"
import type { Signal } from "../platform/Notices.ts"
import * as Pusher from "./Pusher.ts"

/** The cross-runner notices (`platform/Notices.ts`) the presence frames travel on. */
export interface PresenceBus {
  readonly node: string
  send(topic: string, payload: unknown): Effect.Effect<void>
  readonly subscribe: Effect.Effect<PubSub.Subscription<Signal>, never, Scope.Scope>
}

const Frame = Schema.Union([
  Schema.Struct({ op: Schema.Literal("join"), c: Schema.String, u: Schema.Int, i: Schema.Unknown }),
  Schema.Struct({ op: Schema.Literal("leave"), c: Schema.String, u: Schema.Int }),
  Schema.Struct({ op: Schema.Literal("client"), c: Schema.String, e: Schema.String, d: Schema.Unknown, u: Schema.Int }),
  Schema.Struct({ op: Schema.Literals(["hello", "beat", "bye"]) })
])
export type PresenceFrame = typeof Frame.Type
const decodeEnvelope = Schema.decodeUnknownOption(Schema.Struct({ n: Schema.String, f: Frame }))

const topic = "presence"
const beatMs = 15_000
/** A runner silent this long (three beats) is gone: its members leave. */
const silentMs = 45_000
/** After a lost LISTEN, members not announced again within this long left meanwhile. */
const resyncMs = 5_000

export interface LocalPresence {
  readonly localMembers: () => ReadonlyArray<{ readonly channel: string; readonly userId: number; readonly info: unknown }>
  readonly isLocal: (channel: string, userId: number) => boolean
  /** Sends `text` to this runner's subscribers of `channel`. */
  readonly deliver: (channel: string, text: string) => void
}

/**
 * Presence across runners: each runner announces its own members joining and leaving and the client
 * events of its sockets; every runner keeps the others' members and hands what changes to its own
 * subscribers, so a member is added once and removed when their last socket on any runner goes.
 * Notices are fire-and-forget, so the view heals itself: a runner announces its members again when
 * another says hello (at start, after a lost LISTEN), beats every 15 s, and is dropped after 45 s of silence.
 */
export const ClusterPresence = {
  make: (bus: PresenceBus, local: LocalPresence) =>
    Effect.gen(function*() {
      const clock = yield* Clock.Clock
      // channel -> user -> their info and the runners they are on (with when each last announced them).
      const remote = new Map<string, Map<number, { info: unknown; nodes: Map<string, number> }>>()
      const lastSeen = new Map<string, number>()
      const outbox = yield* Queue.unbounded<PresenceFrame>()
      const now = () => clock.currentTimeMillisUnsafe()

      const present = (channel: string, userId: number) => local.isLocal(channel, userId) || remote.get(channel)?.has(userId) === true

      const add = (node: string, channel: string, userId: number, info: unknown) => {
        const before = present(channel, userId)
        const members = remote.get(channel) ?? new Map()
        remote.set(channel, members)
        const member = members.get(userId) ?? { info, nodes: new Map() }
        member.info = info
        member.nodes.set(node, now())
        members.set(userId, member)
        if (!before) local.deliver(channel, Pusher.memberAdded(channel, { userId, userInfo: info }))
      }

      const remove = (node: string, channel: string, userId: number) => {
        const members = remote.get(channel)
        const member = members?.get(userId)
        if (members === undefined || member === undefined || !member.nodes.delete(node)) return
        if (member.nodes.size === 0) members.delete(userId)
        if (members.size === 0) remote.delete(channel)
        if (!present(channel, userId)) local.deliver(channel, Pusher.memberRemoved(channel, userId))
      }

      /** Removes what `node` announced (every member, or those not announced again since `before`). */
      const drop = (node: string, before = Number.POSITIVE_INFINITY) => {
        for (const [channel, members] of [...remote]) {
          for (const [userId, member] of [...members]) {
            const at = member.nodes.get(node)
            if (at !== undefined && at < before) remove(node, channel, userId)
          }
        }
      }

      const announce = (frame: PresenceFrame) => {
        Queue.offerUnsafe(outbox, frame)
      }
      const announceMembers = () => {
        for (const m of local.localMembers()) announce({ op: "join", c: m.channel, u: m.userId, i: m.info ?? null })
      }

      const handle = (node: string, frame: PresenceFrame) => {
        lastSeen.set(node, now())
        switch (frame.op) {
          case "join":
            return add(node, frame.c, frame.u, frame.i)
          case "leave":
            return remove(node, frame.c, frame.u)
          case "client":
            return local.deliver(frame.c, Pusher.clientEvent(frame.c, frame.e, frame.d, frame.u))
          case "hello":
            return announceMembers()
          case "bye":
            lastSeen.delete(node)
            return drop(node)
          case "beat":
            return
        }
      }

      const resync = Effect.gen(function*() {
        const since = now()
        announce({ op: "hello" })
        yield* Effect.sleep(resyncMs)
        for (const node of [...lastSeen.keys()]) drop(node, since)
      })

      const subscription = yield* bus.subscribe
      yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
        const signal = yield* PubSub.take(subscription)
        if (signal._tag === "Listening") {
          yield* Effect.forkScoped(resync)
          return
        }
        if (signal.topic !== topic) return
        const envelope = decodeEnvelope(signal.payload)
        if (Option.isSome(envelope) && envelope.value.n !== bus.node) handle(envelope.value.n, envelope.value.f)
      }).pipe(Effect.catchCause((cause) => Effect.logWarning("presence notice dropped", cause)))))

      yield* Effect.forkScoped(Effect.forever(
        Effect.flatMap(Queue.take(outbox), (frame) => bus.send(topic, { n: bus.node, f: frame }))
      ))
      yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
        yield* Effect.sleep(beatMs)
        announce({ op: "beat" })
        for (const [node, at] of [...lastSeen]) {
          if (now() - at > silentMs) {
            lastSeen.delete(node)
            drop(node)
          }
        }
      })))
      // Runs first when the gateway stops: the other runners drop this one's members at once.
      yield* Effect.addFinalizer(() => bus.send(topic, { n: bus.node, f: { op: "bye" } }))
      announce({ op: "hello" })

      return {
        announce,
        present,
        hasRemote: (channel: string) => (remote.get(channel)?.size ?? 0) > 0,
        members: (channel: string): Array<Pusher.PresenceMember> =>
          [...(remote.get(channel) ?? [])].map(([userId, m]) => ({ userId, userInfo: m.info }))
      }
    })
}

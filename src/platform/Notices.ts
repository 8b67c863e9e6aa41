import { Context, Effect, Layer, Option, PubSub, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { AppConfig } from "./Config.ts"

/** The channel every runner LISTENs on; committed events travel on it too (`src/events/`). */
export const noticeChannel = "crm_events"

export type Signal =
  /** A notice another runner sent, or this one (delivered here at once, not through NOTIFY). */
  | { readonly _tag: "Notice"; readonly topic: string; readonly payload: unknown }
  /** The LISTEN connection was (re)established: whatever was sent while it was down is lost. */
  | { readonly _tag: "Listening" }

/** The wire form of a notice on `noticeChannel`: `t` tells it apart from an event's. */
export interface NoticeFrame {
  readonly n: string
  readonly t: string
  readonly p: unknown
}

export const isNoticeFrame = (value: unknown): value is NoticeFrame =>
  typeof value === "object" && value !== null && typeof (value as { t?: unknown }).t === "string"

/**
 * Small cross-runner signals (cache invalidations) over the one LISTEN connection each runner
 * already holds for events: `Events` owns that connection and hands what it hears to `receive`.
 * Without a PostgreSQL server (embedded mode) there is one runner and notices stay local.
 */
export class Notices extends Context.Service<Notices, {
  readonly node: string
  /**
   * Delivers `payload` under `topic` here at once and to the other runners by NOTIFY. Inside a
   * transaction the NOTIFY goes out at commit (and never on rollback), so call it after the write.
   */
  send(topic: string, payload: unknown): Effect.Effect<void>
  /** For the LISTEN owner: a frame heard from another runner, or the connection coming (back) up. */
  receive(signal: Signal): Effect.Effect<void>
  readonly subscribe: Effect.Effect<PubSub.Subscription<Signal>, never, Scope.Scope>
}>()("crm/platform/Notices") {
  static readonly layer = Layer.effect(
    Notices,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const config = yield* AppConfig
      const bus = yield* PubSub.unbounded<Signal>()
      const node = randomUUID()
      const crossNode = Option.isSome(config.databaseUrl)
      const send = (topic: string, payload: unknown) =>
        Effect.gen(function*() {
          if (crossNode) {
            const frame: NoticeFrame = { n: node, t: topic, p: payload }
            yield* sql`SELECT pg_notify(${noticeChannel}, ${JSON.stringify(frame)})`.pipe(
              Effect.catchCause((cause) => Effect.logWarning("notice not sent; other runners catch up by expiry", cause))
            )
          }
          yield* sql.afterCommit(PubSub.publish(bus, { _tag: "Notice", topic, payload }))
        })
      return Notices.of({
        node,
        send,
        receive: (signal) => PubSub.publish(bus, signal).pipe(Effect.asVoid),
        subscribe: PubSub.subscribe(bus)
      })
    })
  )
}

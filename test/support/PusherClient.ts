import { Effect, Queue, type Scope } from "effect"
import PusherModule from "pusher-js"

// pusher-js types declare an ES default export, but its Node build is `module.exports = Pusher`.
export const Pusher = PusherModule as unknown as typeof PusherModule.default
export type PusherClient = InstanceType<typeof Pusher>

export const WAIT = "5 seconds"

type Emitter = {
  bind(event: string, callback: (data: unknown) => void): unknown
  unbind(event?: string, callback?: Function): unknown
}

/** Collects `event` from an emitter; bind it before the action that triggers the event. */
export const listen = (emitter: Emitter, event: string): Effect.Effect<Queue.Queue<unknown>, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const inbox = yield* Queue.unbounded<unknown>()
      const callback = (data: unknown) => {
        Queue.offerUnsafe(inbox, data)
      }
      emitter.bind(event, callback)
      return { inbox, callback }
    }),
    ({ callback }) => Effect.sync(() => emitter.unbind(event, callback))
  ).pipe(Effect.map(({ inbox }) => inbox))

export const next = <A>(inbox: Queue.Queue<A>) => Queue.take(inbox).pipe(Effect.timeout(WAIT))

/**
 * A pusher-js client on the app's realtime port that authorizes through the real
 * `POST /v1/broadcasting/auth` with pusher-js's own form-posting authorizer.
 */
export const connectPusher = (options: {
  readonly realtimePort: number
  readonly appKey: string
  readonly apiUrl: string
  readonly token: string
}) =>
  Effect.gen(function*() {
    const client = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Pusher(options.appKey, {
          cluster: "local",
          wsHost: "127.0.0.1",
          wsPort: options.realtimePort,
          forceTLS: false,
          enabledTransports: ["ws"],
          disableStats: true,
          channelAuthorization: {
            transport: "ajax",
            endpoint: `${options.apiUrl}/v1/broadcasting/auth`,
            headers: { Authorization: `Bearer ${options.token}`, Accept: "application/json" }
          }
        })
      ),
      (client) => Effect.sync(() => client.disconnect())
    )
    const connected = yield* listen(client.connection, "connected")
    if (client.connection.state !== "connected") yield* next(connected)
    return client
  })

export const subscribe = (client: PusherClient, name: string) =>
  Effect.gen(function*() {
    const channel = client.subscribe(name)
    const succeeded = yield* listen(channel, "pusher:subscription_succeeded")
    const failed = yield* listen(channel, "pusher:subscription_error")
    if (!channel.subscribed) {
      const outcome = yield* Effect.raceFirst(
        Effect.map(next(succeeded), () => undefined),
        Effect.map(next(failed), (error) => error)
      )
      if (outcome !== undefined) return yield* Effect.die(new Error(`subscription to ${name} failed: ${JSON.stringify(outcome)}`))
    }
    return channel
  })

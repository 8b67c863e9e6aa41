import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Exit, Layer, Option } from "effect"
import { HttpServer } from "effect/http"
import { AppLayer } from "./App.ts"
import { AppConfig } from "./platform/Config.ts"
import { log, LoggingLayer } from "./platform/Logging.ts"
import { RealtimeGateway } from "./realtime/Gateway.ts"
import { SHUTDOWN_LIMIT_MS, shutdownBegins } from "./platform/Shutdown.ts"
import { sinceProcessStart } from "./platform/StartupPhases.ts"

/** The first phase of a start: the process up to here, mostly loading and compiling modules. */
const ModulesLoaded = Layer.effectDiscard(Effect.flatMap(sinceProcessStart, (ms) =>
  Effect.logInfo("startup phase: modules").pipe(Effect.annotateLogs({ phase: "modules", ms }))))

/** One info line once every port serves: what an operator checks first. */
const Announce = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* AppConfig
  const server = yield* HttpServer.HttpServer
  const gateway = yield* RealtimeGateway
  yield* Effect.logInfo("server ready").pipe(Effect.annotateLogs({
    mode: Option.isSome(config.databaseUrl) ? "server (PostgreSQL)" : "embedded (PGlite)",
    cluster: config.cluster,
    http_port: server.address._tag === "UnixPathAddress" ? undefined : server.address.port,
    realtime_port: gateway.port,
    realtime_engine: gateway.engine,
    node: process.version,
    startup_ms: yield* sinceProcessStart
  }))
}))

let signalled = false
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    signalled = true
    shutdownBegins()
    log.info({ signal }, "shutting down: no new connections, draining in-flight requests and background work")
    setTimeout(() => {
      log.fatal({ limit_ms: SHUTDOWN_LIMIT_MS }, "shutdown did not finish in time; exiting")
      process.exit(1)
    }, SHUTDOWN_LIMIT_MS).unref()
  })
}

/** The innermost message: a ServeError says nothing itself, its cause says `listen EADDRINUSE …`. */
const messageOf = (error: unknown): string => {
  let message = String(error)
  for (let e = error, depth = 0; e !== undefined && e !== null && depth < 8; e = (e as { readonly cause?: unknown }).cause, depth++) {
    if (e instanceof Error && e.message !== "") message = e.message
  }
  return message
}

const program = Layer.launch(Announce.pipe(Layer.provide(AppLayer.pipe(Layer.provide(ModulesLoaded))), Layer.provide(LoggingLayer))).pipe(
  Effect.tapCause((cause) =>
    Effect.sync(() => {
      if (Cause.hasInterruptsOnly(cause)) return
      const error = Cause.squash(cause)
      log.fatal(
        { cause: Cause.pretty(cause) },
        `${signalled ? "shutdown" : "startup"} failed: ${messageOf(error)}`
      )
    })
  )
)

NodeRuntime.runMain(program, {
  disableErrorReporting: true,
  teardown: (exit, onExit) => {
    // A signal interrupts the app on purpose: a clean drain is a clean exit.
    if (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) && signalled) {
      log.info("shut down")
      return onExit(0)
    }
    onExit(Exit.isSuccess(exit) ? 0 : 1)
  }
})

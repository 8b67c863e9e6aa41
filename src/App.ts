import { NodeHttpServer } from "@effect/platform-node"
import { ByteSize, Context, Duration, Effect, Layer } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServer } from "effect/http"
import { CompanyEntities } from "../cluster/CompanyHandlers.ts"
import { RateLimiterLayer } from "../cluster/RateLimiterLayer.ts"
import { ClusterLayer } from "../cluster/Runner.ts"
import { ConversationEntities } from "../cluster/ConversationHandlers.ts"
import { SendLaneLayer } from "../cluster/SendLaneLayer.ts"
import { BroadcastRunEntities } from "../cluster/BroadcastRunHandlers.ts"
import { BroadcastRunDriverLayer } from "../cluster/BroadcastRunDriverLayer.ts"
import { Sender } from "./messages/Sender.ts"
import { Passwords } from "./auth/Passwords.ts"
import { ChannelsLayer } from "./channels/Channels.ts"
import { Tokens } from "./auth/Tokens.ts"
import { Events } from "./events/Events.ts"
import { BackgroundLayer } from "./Background.ts"
import { Routes } from "./Http.ts"
import { AppConfig, type AppConfigShape } from "./platform/Config.ts"
import { LoggingLayer } from "./platform/Logging.ts"
import { RequestDeadline } from "./platform/HttpKernel.ts"
import { BlobStore } from "./platform/files/BlobStore.ts"
import { Imaging } from "./platform/files/Imaging.ts"
import { SignedUrls } from "./platform/files/SignedUrls.ts"
import { Mailer } from "./platform/Mail.ts"
import { Sms } from "./platform/Sms.ts"
import { Jobs } from "./platform/Jobs.ts"
import { MigrationsLayer } from "./platform/Migrations.ts"
import { SqlLayer } from "./platform/Sql.ts"
import { gatedServer } from "./platform/StartupGate.ts"
import { phase } from "./platform/StartupPhases.ts"
import { RealtimeLayer } from "./realtime/Realtime.ts"
import { PbxFromConfig } from "./telephony/Kamailio.ts"
import { ChannelAccess } from "./auth/ChannelAccess.ts"
import { AutomationEntities } from "../cluster/AutomationHandlers.ts"
import { HeapPolicyLayer } from "./platform/HeapPolicy.ts"
import { AutomationStarterLayer } from "../cluster/AutomationStarterLayer.ts"
import { Runs } from "./automations/Runs.ts"
import { AutomationsRepo } from "./automations/Repo.ts"
import { CredentialCache } from "./auth/Credentials.ts"
import { Notices } from "./platform/Notices.ts"
import { MetricsLayer, TracingLayer } from "./Observability.ts"


/** The database, after migrations have run. */
const Database = phase("migrations", MigrationsLayer).pipe(Layer.provideMerge(phase("database", SqlLayer)))

const Cluster = phase("cluster", CompanyEntities.pipe(Layer.provideMerge(ClusterLayer)))

// The channels' provider adapters spend their budgets through the rate limiter.
const Platform = phase(
  "services",
  Layer.mergeAll(Passwords.layer, Tokens.layer, Events.layer, Jobs.layer, Mailer.layer, Sms.layer, PbxFromConfig, ChannelsLayer.pipe(Layer.provideMerge(ChannelAccess.layer)), CredentialCache.layer).pipe(
    Layer.provideMerge(RateLimiterLayer),
    Layer.provideMerge(Notices.layer)
  )
).pipe(Layer.provideMerge(Cluster))

const Server = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  const maxBodySize = Layer.succeed(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(config.maxBodyBytes))
  // The routes are built before the port opens (HttpRouter.serve opens it first and builds them
  // while accepted connections wait), so a connection is refused until the app can answer it.
  const built = Layer.build(
    Layer.provideMerge(Routes, Layer.mergeAll(HttpRouter.layer, NodeHttpServer.layerHttpServices, maxBodySize))
  )
  // Request-level requirements are met by the server's context when a request runs, as in HttpRouter.serve.
  const routes = yield* (built as Effect.Effect<
    Effect.Success<typeof built>,
    Effect.Error<typeof built>,
    HttpRouter.Request.Without<Effect.Services<typeof built>>
  >)
  const handler = Context.get(routes, HttpRouter.HttpRouter).asHttpEffect()
  return HttpServer.serve(handler).pipe(
    // Drains in-flight requests for up to 8 s on shutdown, inside main.ts's 10 s limit.
    Layer.provideMerge(NodeHttpServer.layer(gatedServer, { port: config.port, host: config.host, gracefulShutdownTimeout: "8 seconds" })),
    Layer.merge(Layer.succeedContext(routes)),
    Layer.provide(maxBodySize),
    Layer.provide(Layer.succeed(RequestDeadline, Duration.millis(config.requestDeadlineMs)))
  )
}))

/** Automation entities (they start runs) and the port the trigger consumer starts runs through. */
const AutomationCluster = Layer.mergeAll(
  AutomationEntities.pipe(Layer.provide(Runs.layer.pipe(Layer.provide(AutomationsRepo.layer)))),
  AutomationStarterLayer
)

export const makeApp = (config: Layer.Layer<AppConfig, unknown>) =>
  phase("http", Server).pipe(
    Layer.provideMerge(phase("background", BackgroundLayer)),
    Layer.provideMerge(AutomationCluster),
    Layer.provideMerge(Layer.mergeAll(BroadcastRunEntities, BroadcastRunDriverLayer)),
    Layer.provideMerge(phase("realtime", RealtimeLayer)),
    Layer.provideMerge(Layer.mergeAll(ConversationEntities.pipe(Layer.provide(Sender.layer)), SendLaneLayer)),
    Layer.provideMerge(Layer.mergeAll(BlobStore.layer, SignedUrls.layer, Imaging.layer)),
    Layer.provideMerge(Platform),
    Layer.provideMerge(Database),
    Layer.provideMerge(HeapPolicyLayer),
    Layer.provideMerge(phase("config", config)),
    Layer.provide(TracingLayer),
    Layer.provide(LoggingLayer)
  )

/** The app as `src/main.ts` runs it: with its metrics port (tests build `makeApp` alone, on ports of their own). */
export const AppLayer = MetricsLayer.pipe(Layer.provideMerge(makeApp(AppConfig.layer)))
export type { AppConfigShape }


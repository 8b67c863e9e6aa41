import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { HttpApiBuilder, HttpApiScalar } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { Api } from "./Api.ts"
import { ApiTokens } from "./api-tokens/ApiTokens.ts"
import { ApiTokensHttp } from "./api-tokens/Http.ts"
import { AuthenticationLayer } from "./auth/Authentication.ts"
import { AuthHttp } from "./auth/Http.ts"
import { AuthRepo } from "./auth/Repo.ts"
import { EventsHttp } from "./events/Http.ts"
import { MeHttp } from "./me/Http.ts"
import { Me } from "./me/Me.ts"
import { PlatformHttp } from "./platform-admin/Http.ts"
import { PlatformAdmin } from "./platform-admin/PlatformAdmin.ts"
import { PlatformKey } from "./platform-admin/PlatformKey.ts"
import { KernelMiddleware } from "./platform/HttpKernel.ts"
import { BroadcastingHttp } from "./realtime/Http.ts"

const HealthRoutes = Layer.mergeAll(
  HttpRouter.add("GET", "/health", HttpServerResponse.jsonUnsafe({ status: "ok" })),
  HttpRouter.add(
    "GET",
    "/ready",
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // Migrations run before the server listens, so a reachable database means ready.
      return yield* sql`SELECT 1`.pipe(
        Effect.timeout("2 seconds"),
        Effect.as(HttpServerResponse.jsonUnsafe({ status: "ready" })),
        Effect.catchCause(() => Effect.succeed(HttpServerResponse.jsonUnsafe({ status: "unavailable" }, { status: 503 })))
      )
    })
  )
)

const Handlers = Layer.mergeAll(MeHttp, AuthHttp, EventsHttp, PlatformHttp, BroadcastingHttp, ApiTokensHttp).pipe(
  Layer.provide([Me.layer, PlatformAdmin.layer, PlatformKey.layer, AuthenticationLayer, ApiTokens.layer]),
  Layer.provide(AuthRepo.layer)
)

export const Routes = Layer.mergeAll(
  HttpApiBuilder.layer(Api, { openapiPath: "/openapi.json" }).pipe(Layer.provide(Handlers)),
  HttpApiScalar.layer(Api, { path: "/docs" }),
  HealthRoutes,
  KernelMiddleware
)

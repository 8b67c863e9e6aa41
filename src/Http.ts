import { Effect, Layer } from "effect"
import { HttpMethod, HttpRouter, HttpServerResponse } from "effect/http"
import { HttpApiBuilder, HttpApiScalar, OpenApi } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { Api } from "./Api.ts"
import { ApiTokensHttp } from "./api-tokens/Http.ts"
import { AuthenticationLayer } from "./auth/Authentication.ts"
import { PlanGateLayer } from "./auth/PlanGate.ts"
import { AuthHttp } from "./auth/Http.ts"
import { AuthRepo } from "./auth/Repo.ts"
import { ChannelsHttp, HooksHttp } from "./channels/Http.ts"
import { ConversationsHttp } from "./conversations/Http.ts"
import { EventsHttp } from "./events/Http.ts"
import { ExportFilesHttp, ExportsHttp } from "./exports/Http.ts"
import { IntegrationsHttp } from "./integrations/Http.ts"
import { InvitationsHttp } from "./invitations/Http.ts"
import { MeHttp } from "./me/Http.ts"
import { MessagesHttp } from "./messages/Http.ts"
import { SignedMediaHttp, UploadsHttp } from "./media/Http.ts"
import { SearchHttp } from "./search/Http.ts"
import { ContactPhotosHttp, ContactsHttp } from "./contacts/Http.ts"
import { TagsHttp } from "./tags/Http.ts"
import { DealsHttp } from "./deals/Http.ts"
import { SegmentsHttp } from "./segments/Http.ts"
import { StickerFilesHttp, StickersHttp } from "./stickers/Http.ts"
import { NotificationsHttp } from "./notifications/Http.ts"
import { MembersHttp } from "./members/Http.ts"
import { PlatformHttp } from "./platform-admin/Http.ts"
import { PlatformKey } from "./platform-admin/PlatformKey.ts"
import { KernelMiddleware, registerKnownRoutes } from "./platform/HttpKernel.ts"
import { registerBodyContracts } from "./platform/InputHygiene.ts"
import { RealtimeGateway } from "./realtime/Gateway.ts"
import { RealtimeAuthHttp } from "./realtime/Http.ts"
import { SoftphoneHttp, TelephonyHttp } from "./telephony/Http.ts"
import { Pbx } from "./telephony/Pbx.ts"
import { TeamsHttp } from "./teams/Http.ts"
import { UserPhotosHttp } from "./users/Http.ts"
import { TemplatesHttp } from "./templates/Http.ts"
import { AutomationsHttp } from "./automations/Http.ts"
import { BroadcastClicksHttp, BroadcastsHttp } from "./broadcasts/Http.ts"

const HealthRoutes = Layer.mergeAll(
  HttpRouter.add("GET", "/health", HttpServerResponse.jsonUnsafe({ status: "ok" })),
  HttpRouter.add(
    "GET",
    "/ready",
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { engine } = yield* RealtimeGateway
      // `in-process`: SIP profiles live in this process only (embedded mode), no phone can register.
      const telephony = { pbx: (yield* Pbx).adapter }
      // Migrations run before the server listens, so a reachable database means ready.
      return yield* sql`SELECT 1`.pipe(
        Effect.timeout("2 seconds"),
        Effect.as(HttpServerResponse.jsonUnsafe({ status: "ready", realtime: { engine }, telephony })),
        Effect.catchCause(() => Effect.succeed(HttpServerResponse.jsonUnsafe({ status: "unavailable", realtime: { engine }, telephony }, { status: 503 })))
      )
    })
  )
)

const Handlers = Layer.mergeAll(
  MeHttp,
  NotificationsHttp,
  AuthHttp,
  EventsHttp,
  PlatformHttp,
  RealtimeAuthHttp,
  ApiTokensHttp,
  TeamsHttp,
  MembersHttp,
  InvitationsHttp,
  TelephonyHttp,
  SoftphoneHttp,
  ChannelsHttp,
  HooksHttp,
  ConversationsHttp,
  ContactsHttp,
  ContactPhotosHttp,
  TagsHttp,
  MessagesHttp,
  UploadsHttp,
  SignedMediaHttp,
  SearchHttp,
  StickersHttp,
  StickerFilesHttp,
  UserPhotosHttp,
  DealsHttp,
  IntegrationsHttp,
  SegmentsHttp,
  ExportsHttp,
  ExportFilesHttp,
  TemplatesHttp,
  AutomationsHttp,
  BroadcastsHttp,
  BroadcastClicksHttp
).pipe(
  Layer.provide([PlatformKey.layer, PlanGateLayer, AuthenticationLayer.pipe(Layer.provide(AuthRepo.layer))])
)

const document = OpenApi.fromApi(Api)
registerBodyContracts(document)
registerKnownRoutes([
  ...Object.entries(document.paths).flatMap(([path, item]) =>
    Object.keys(item).filter((key) => HttpMethod.isHttpMethod(key.toUpperCase())).map((method) => [method, path] as const)
  ),
  ["GET", "/health"],
  ["GET", "/ready"],
  ["GET", "/openapi.json"],
  ["GET", "/docs"]
])

export const Routes = Layer.mergeAll(
  HttpApiBuilder.layer(Api, { openapiPath: "/openapi.json" }).pipe(Layer.provide(Handlers)),
  HttpApiScalar.layer(Api, { path: "/docs" }),
  HealthRoutes,
  KernelMiddleware
)

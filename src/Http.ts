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
import { Hooks } from "./channels/Hooks.ts"
import { ChannelsHttp, HooksHttp } from "./channels/Http.ts"
import { Conversations } from "./conversations/Conversations.ts"
import { ConversationsHttp } from "./conversations/Http.ts"
import { EventsHttp } from "./events/Http.ts"
import { InvitationsHttp } from "./invitations/Http.ts"
import { Invitations } from "./invitations/Invitations.ts"
import { MeHttp } from "./me/Http.ts"
import { MessagesHttp } from "./messages/Http.ts"
import { SignedMediaHttp, UploadsHttp } from "./media/Http.ts"
import { Media } from "./media/Media.ts"
import { Inbound } from "./messages/Inbound.ts"
import { Messages } from "./messages/Messages.ts"
import { SearchHttp } from "./search/Http.ts"
import { ContactBlocking } from "./contacts/Blocking.ts"
import { Contacts } from "./contacts/Contacts.ts"
import { ContactEligibility } from "./contacts/Eligibility.ts"
import { ContactPhotosHttp, ContactsHttp } from "./contacts/Http.ts"
import { ContactPhotos } from "./contacts/Photos.ts"
import { TagsHttp } from "./tags/Http.ts"
import { SegmentsHttp } from "./segments/Http.ts"
import { Search } from "./search/Search.ts"
import { StickerFilesHttp, StickersHttp } from "./stickers/Http.ts"
import { StickerImports } from "./stickers/Imports.ts"
import { Stickers } from "./stickers/Stickers.ts"
import { Me } from "./me/Me.ts"
import { NotificationsHttp } from "./notifications/Http.ts"
import { MembersHttp } from "./members/Http.ts"
import { Members } from "./members/Members.ts"
import { PlatformHttp } from "./platform-admin/Http.ts"
import { PlatformAdmin } from "./platform-admin/PlatformAdmin.ts"
import { PlatformKey } from "./platform-admin/PlatformKey.ts"
import { KernelMiddleware } from "./platform/HttpKernel.ts"
import { RealtimeAuthHttp } from "./realtime/Http.ts"
import { SoftphoneHttp, TelephonyHttp } from "./telephony/Http.ts"
import { Telephony } from "./telephony/Telephony.ts"
import { TeamsHttp } from "./teams/Http.ts"
import { Teams } from "./teams/Teams.ts"
import { UserPhotosHttp } from "./users/Http.ts"
import { UserPhotos } from "./users/Photos.ts"

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

const Handlers = Layer.mergeAll(MeHttp, NotificationsHttp, AuthHttp, EventsHttp, PlatformHttp, RealtimeAuthHttp, ApiTokensHttp, TeamsHttp, MembersHttp, InvitationsHttp, TelephonyHttp, SoftphoneHttp, ChannelsHttp, HooksHttp, ConversationsHttp, ContactsHttp, ContactPhotosHttp, TagsHttp, SegmentsHttp, MessagesHttp, UploadsHttp, SignedMediaHttp, SearchHttp, StickersHttp, StickerFilesHttp, UserPhotosHttp).pipe(
  Layer.provide([Me.layer, PlatformAdmin.layer, PlatformKey.layer, AuthenticationLayer, ApiTokens.layer, Teams.layer, Members.layer, Invitations.layer, Telephony.layer, Hooks.layer, Conversations.layer, Messages.layer, Search.layer]),
  Layer.provide(Inbound.layer),
  Layer.provide([Contacts.layer, ContactBlocking.layer, ContactEligibility.layer, ContactPhotos.layer, UserPhotos.layer]),
  Layer.provide(Media.layer),
  Layer.provide(StickerImports.layer.pipe(Layer.provideMerge(Stickers.layer))),
  Layer.provide(AuthRepo.layer)
)

export const Routes = Layer.mergeAll(
  HttpApiBuilder.layer(Api, { openapiPath: "/openapi.json" }).pipe(Layer.provide(Handlers)),
  HttpApiScalar.layer(Api, { path: "/docs" }),
  HealthRoutes,
  KernelMiddleware
)

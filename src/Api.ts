import { HttpApi, OpenApi } from "effect/http-api"
import { ApiTokensApi } from "./api-tokens/Api.ts"
import { ChannelsApi } from "./channels/Api.ts"
import { ConversationsApi } from "./conversations/Api.ts"
import { MessagesApi } from "./messages/Api.ts"
import { SignedMediaApi, UploadsApi } from "./media/Api.ts"
import { SearchApi } from "./search/Api.ts"
import { ContactPhotosApi, ContactsApi } from "./contacts/Api.ts"
import { TagsApi } from "./tags/Api.ts"
import { DealsGroups } from "./deals/Api.ts"
import { SegmentsApi } from "./segments/Api.ts"
import { StickerFilesApi, StickersApi } from "./stickers/Api.ts"
import { HooksApi } from "./channels/HooksApi.ts"
import { AuthApi } from "./auth/Api.ts"
import { EventsApi } from "./events/Api.ts"
import { ExportFilesApi, ExportsApi } from "./exports/Api.ts"
import { IntegrationsApi } from "./integrations/Api.ts"
import { InvitationsApi } from "./invitations/Api.ts"
import { MeApi } from "./me/Api.ts"
import { MembersApi } from "./members/Api.ts"
import { NotificationsApi } from "./notifications/Api.ts"
import { PlatformApi } from "./platform-admin/Api.ts"
import { RealtimeAuthApi } from "./realtime/Api.ts"
import { SoftphoneApi, TelephonyApi } from "./telephony/Api.ts"
import { TeamsApi } from "./teams/Api.ts"
import { UserPhotosApi } from "./users/Api.ts"
import { TemplatesApi } from "./templates/Api.ts"
import { AutomationsApi } from "./automations/Api.ts"
import { finishOpenApi } from "./platform/OpenApiDocument.ts"
import { Catalog } from "./events/Catalog.ts"
import { BroadcastClicksApi, BroadcastsApi } from "./broadcasts/Api.ts"

export class Api extends HttpApi.make("crm")
  .add(MeApi)
  .add(NotificationsApi)
  .add(AuthApi)
  .add(EventsApi)
  .add(PlatformApi)
  .add(RealtimeAuthApi)
  .add(ApiTokensApi)
  .add(TeamsApi)
  .add(MembersApi)
  .add(InvitationsApi)
  .add(TelephonyApi)
  .add(SoftphoneApi)
  .add(ChannelsApi)
  .add(HooksApi)
  .add(ConversationsApi)
  .add(ContactsApi)
  .add(ContactPhotosApi)
  .add(TagsApi)
  .add(SegmentsApi)
  .add(MessagesApi)
  .add(UploadsApi)
  .add(SignedMediaApi)
  .add(SearchApi)
  .add(StickersApi)
  .add(StickerFilesApi)
  .add(UserPhotosApi)
  .add(...DealsGroups)
  .add(IntegrationsApi)
  .add(ExportsApi, ExportFilesApi)
  .add(TemplatesApi)
  .add(AutomationsApi)
  .add(BroadcastsApi, BroadcastClicksApi)
  .annotate(HttpApi.PayloadParseOptions, { errors: "all" })
  .annotate(HttpApi.QueryParseOptions, { errors: "all" })
  .annotateMerge(OpenApi.annotations({
    title: "Messaging and CRM Platform API",
    version: "1",
    description: "Multi-tenant messaging and CRM API. Success bodies are `{data: …}`; errors follow the contract's shapes.",
    transform: (document) => finishOpenApi(document, Catalog)
  }))
{}

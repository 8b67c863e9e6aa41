import { HttpApi, OpenApi } from "effect/http-api"
import { ApiTokensApi } from "./api-tokens/Api.ts"
import { AuthApi } from "./auth/Api.ts"
import { EventsApi } from "./events/Api.ts"
import { MeApi } from "./me/Api.ts"
import { PlatformApi } from "./platform-admin/Api.ts"
import { BroadcastingApi } from "./realtime/Api.ts"

export class Api extends HttpApi.make("crm")
  .add(MeApi)
  .add(AuthApi)
  .add(EventsApi)
  .add(PlatformApi)
  .add(BroadcastingApi)
  .add(ApiTokensApi)
  .annotate(HttpApi.PayloadParseOptions, { errors: "all" })
  .annotate(HttpApi.QueryParseOptions, { errors: "all" })
  .annotateMerge(OpenApi.annotations({
    title: "Messaging and CRM Platform API",
    version: "1",
    description: "Multi-tenant messaging and CRM API. Success bodies are `{data: …}`; errors follow the contract's shapes."
  }))
{}

import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Realtime } from "./Realtime.ts"

export const RealtimeAuthHttp = HttpApiBuilder.group(Api, "realtimeAuth", Effect.fn(function*(handlers) {
  const realtime = yield* Realtime
  return handlers.handle("auth", ({ payload }) => realtime.authorize(payload.socket_id, payload.channel_name))
}))

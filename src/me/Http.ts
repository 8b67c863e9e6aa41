import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Me } from "./Me.ts"

export const MeHttp = HttpApiBuilder.group(Api, "me", Effect.fn(function*(handlers) {
  const me = yield* Me
  return handlers.handle("get", () => Effect.map(me.profile, (data) => ({ data })))
}))

import { Effect, Layer, Option, Redacted } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { safeEqualString } from "../platform/Crypto.ts"
import { ServiceUnavailable, unauthenticated } from "../platform/Errors.ts"
import { PlatformAuth } from "./Api.ts"
import { PlatformAdmin } from "./PlatformAdmin.ts"
import { PlatformKey } from "./PlatformKey.ts"
import { data } from "../platform/Envelope.ts"

export const PlatformAuthLayer = Layer.effect(
  PlatformAuth,
  Effect.gen(function*() {
    const key = yield* PlatformKey
    return PlatformAuth.of({
      bearer: (httpEffect, { credential }) =>
        Option.match(key, {
          onNone: () => Effect.fail(new ServiceUnavailable({ message: "The platform API is disabled: set PLATFORM_API_KEY." })),
          onSome: (key) =>
            safeEqualString(Redacted.value(credential), Redacted.value(key)) ? httpEffect : Effect.fail(unauthenticated())
        })
    })
  })
)

export const PlatformHttp = HttpApiBuilder.group(Api, "platform", Effect.fn(function*(handlers) {
  const admin = yield* PlatformAdmin
  return handlers
    .handle("createCompany", ({ payload }) => data(admin.createCompany(payload)))
    .handle("getCompany", ({ params }) => data(admin.getCompany(params.id)))
    .handle("updateCompany", ({ params, payload }) => data(admin.updateCompany(params.id, payload)))
    .handle("addUser", ({ params, payload }) => Effect.map(admin.addUser(params.id, payload), (user) => ({ data: { user } })))
})).pipe(Layer.provide([PlatformAdmin.layer, PlatformAuthLayer]))

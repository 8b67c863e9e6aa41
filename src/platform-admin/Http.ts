import { Effect, Layer, Redacted } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { ServiceUnavailable, unauthenticated } from "../platform/Errors.ts"
import { PlatformAuth } from "./Api.ts"
import { PlatformAdmin } from "./PlatformAdmin.ts"
import { PlatformKeyRing } from "./PlatformKey.ts"
import { data } from "../platform/Envelope.ts"

export const PlatformAuthLayer = Layer.effect(
  PlatformAuth,
  Effect.gen(function*() {
    const keys = yield* PlatformKeyRing
    return PlatformAuth.of({
      bearer: (httpEffect, { credential }) =>
        Effect.flatMap(keys.check(Redacted.value(credential)), (verdict) =>
          verdict === "ok"
            ? Effect.void
            : verdict === "disabled"
            ? Effect.fail(new ServiceUnavailable({ message: "The platform API is disabled: set PLATFORM_API_KEY." }))
            : Effect.fail(unauthenticated())).pipe(Effect.andThen(httpEffect))
    })
  })
)

export const PlatformHttp = HttpApiBuilder.group(Api, "platform", Effect.fn(function*(handlers) {
  const admin = yield* PlatformAdmin
  const keys = yield* PlatformKeyRing
  return handlers
    .handle("createCompany", ({ payload }) => data(admin.createCompany(payload)))
    .handle("listCompanies", ({ query }) => data(admin.listCompanies(query.page ?? 1, query.perPage ?? 20)))
    .handle("rotateKey", () => data(Effect.map(keys.rotate, (key) => ({ key }))))
    .handle("getCompany", ({ params }) => data(admin.getCompany(params.id)))
    .handle("updateCompany", ({ params, payload }) => data(admin.updateCompany(params.id, payload)))
    .handle("addUser", ({ params, payload }) => Effect.map(admin.addUser(params.id, payload), (user) => ({ data: { user } })))
})).pipe(Layer.provide([PlatformAdmin.layer, PlatformAuthLayer]), Layer.provide(PlatformKeyRing.layer))

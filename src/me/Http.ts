import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Me } from "./Me.ts"
import { PhoneVerification } from "./PhoneVerification.ts"

export const MeHttp = HttpApiBuilder.group(Api, "me", Effect.fn(function*(handlers) {
  const me = yield* Me
  const phone = yield* PhoneVerification
  const wrap = <A>(data: A) => ({ data })
  return handlers
    .handle("get", () => Effect.map(me.profile, wrap))
    .handle("update", ({ payload }) => Effect.map(me.updateProfile(payload), wrap))
    .handle("changePassword", ({ payload }) => Effect.map(me.changePassword(payload), wrap))
    .handle("setAvailability", ({ payload }) => Effect.map(me.setAvailability(payload.status), wrap))
    .handle("switchCompany", ({ payload }) => Effect.map(me.switchCompany(payload.company_id), wrap))
    .handle("sendPhoneCode", () => Effect.map(phone.sendCode, wrap))
    .handle("verifyPhone", ({ payload }) => Effect.map(phone.verify(payload.code), wrap))
})).pipe(Layer.provide(PhoneVerification.layer))

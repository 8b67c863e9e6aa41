import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { data } from "../platform/Envelope.ts"
import { Api } from "../Api.ts"
import { Me } from "./Me.ts"
import { PhoneVerification } from "./PhoneVerification.ts"

export const MeHttp = HttpApiBuilder.group(Api, "me", Effect.fn(function*(handlers) {
  const me = yield* Me
  const phone = yield* PhoneVerification
  return handlers
    .handle("get", () => data(me.profile))
    .handle("update", ({ payload }) => data(me.updateProfile(payload)))
    .handle("changePassword", ({ payload }) => data(me.changePassword(payload)))
    .handle("setAvailability", ({ payload }) => data(me.setAvailability(payload.status)))
    .handle("switchCompany", ({ payload }) => data(me.switchCompany(payload.company_id)))
    .handle("sendPhoneCode", () => data(phone.sendCode))
    .handle("verifyPhone", ({ payload }) => data(phone.verify(payload.code)))
})).pipe(Layer.provide([Me.layer, PhoneVerification.layer]))

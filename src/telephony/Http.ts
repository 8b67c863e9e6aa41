import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Telephony } from "./Telephony.ts"
import { data } from "../platform/Envelope.ts"


export const TelephonyHttp = HttpApiBuilder.group(Api, "telephony", Effect.fn(function*(handlers) {
  const telephony = yield* Telephony
  return handlers
    .handle("list", () => data(telephony.listMembers))
    .handle("enable", ({ params }) => data(telephony.enable(params.memberId)))
    .handle("disable", ({ params }) => data(telephony.disable(params.memberId)))
    .handle("credentials", ({ params }) => data(telephony.credentials(params.memberId)))
    .handle("resetPassword", ({ params }) => data(telephony.resetPassword(params.memberId)))
    .handle("setExtension", ({ params, payload }) => data(telephony.setExtension(params.memberId, payload.extension)))
})).pipe(Layer.provide(Telephony.layer))

export const SoftphoneHttp = HttpApiBuilder.group(Api, "softphone", Effect.fn(function*(handlers) {
  const telephony = yield* Telephony
  return handlers
    .handle("credentials", () => data(telephony.ownCredentials))
    .handle("resetPassword", () => data(telephony.resetOwnPassword))
    .handle("externalCredentials", () => data(telephony.ownNativeCredentials))
    .handle("resetExternalPassword", () => data(telephony.resetOwnNativePassword))
    .handle("colleagues", () => data(telephony.colleagues))
    .handle("internalCall", ({ payload }) => data(telephony.internalCall(payload)))
    .handle("externalCall", ({ payload }) => data(telephony.externalCall(payload)))
})).pipe(Layer.provide(Telephony.layer))

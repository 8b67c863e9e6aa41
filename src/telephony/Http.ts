import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { Telephony } from "./Telephony.ts"

const wrap = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.map(effect, (data) => ({ data }))

export const TelephonyHttp = HttpApiBuilder.group(Api, "telephony", Effect.fn(function*(handlers) {
  const telephony = yield* Telephony
  return handlers
    .handle("list", () => wrap(telephony.listMembers))
    .handle("enable", ({ params }) => wrap(telephony.enable(params.memberId)))
    .handle("disable", ({ params }) => wrap(telephony.disable(params.memberId)))
    .handle("credentials", ({ params }) => wrap(telephony.credentials(params.memberId)))
    .handle("resetPassword", ({ params }) => wrap(telephony.resetPassword(params.memberId)))
    .handle("setExtension", ({ params, payload }) => wrap(telephony.setExtension(params.memberId, payload.extension)))
}))

export const SoftphoneHttp = HttpApiBuilder.group(Api, "softphone", Effect.fn(function*(handlers) {
  const telephony = yield* Telephony
  return handlers
    .handle("credentials", () => wrap(telephony.ownCredentials))
    .handle("resetPassword", () => wrap(telephony.resetOwnPassword))
    .handle("externalCredentials", () => wrap(telephony.ownNativeCredentials))
    .handle("resetExternalPassword", () => wrap(telephony.resetOwnNativePassword))
    .handle("colleagues", () => wrap(telephony.colleagues))
    .handle("internalCall", ({ payload }) => wrap(telephony.internalCall(payload)))
    .handle("externalCall", ({ payload }) => wrap(telephony.externalCall(payload)))
}))

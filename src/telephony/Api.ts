import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { AuthErrors, BadGateway, NotFound, Unprocessable } from "../platform/Errors.ts"
import {
  BrowserCredentials,
  CallStarted,
  Colleague,
  ExternalCall,
  InternalCall,
  MemberId,
  MemberTelephony,
  NativeCredentials,
  SetExtension,
  SipLogin
} from "./Domain.ts"
import { Data } from "../platform/Envelope.ts"

const MemberParams = { memberId: MemberId }
const AdminErrors = [...AuthErrors, NotFound, Unprocessable] as const
const SelfErrors = [...AuthErrors, Unprocessable] as const

export class TelephonyApi extends HttpApiGroup.make("telephony")
  .add(
    HttpApiEndpoint.get("list", "/v1/companies/current/members/telephony", {
      success: Data(Schema.Array(MemberTelephony)),
      error: AuthErrors
    }),
    HttpApiEndpoint.post("enable", "/v1/companies/current/members/:memberId/telephony/enable", {
      params: MemberParams,
      success: Data(MemberTelephony),
      error: [...AdminErrors, BadGateway]
    }),
    HttpApiEndpoint.post("disable", "/v1/companies/current/members/:memberId/telephony/disable", {
      params: MemberParams,
      success: Data(MemberTelephony),
      error: [...AdminErrors, BadGateway]
    }),
    HttpApiEndpoint.get("credentials", "/v1/companies/current/members/:memberId/telephony/credentials", {
      params: MemberParams,
      success: Data(NativeCredentials),
      error: AdminErrors
    }),
    HttpApiEndpoint.post("resetPassword", "/v1/companies/current/members/:memberId/telephony/reset-password", {
      params: MemberParams,
      success: Data(SipLogin),
      error: [...AdminErrors, BadGateway]
    }),
    HttpApiEndpoint.post("setExtension", "/v1/companies/current/members/:memberId/telephony/extension", {
      params: MemberParams,
      payload: SetExtension,
      success: Data(MemberTelephony),
      error: AdminErrors
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Operator telephony",
    description: "SIP profiles of members (permission company_telephony.manage): a browser profile `agent-<id>-web` and a native one `agent-<id>`."
  }))
{}

export class SoftphoneApi extends HttpApiGroup.make("softphone")
  .add(
    HttpApiEndpoint.get("credentials", "/v1/softphone/credentials", {
      success: Data(BrowserCredentials),
      error: SelfErrors
    }),
    HttpApiEndpoint.post("resetPassword", "/v1/softphone/reset-password", {
      success: Data(BrowserCredentials),
      error: [...SelfErrors, BadGateway]
    }),
    HttpApiEndpoint.get("externalCredentials", "/v1/softphone/external-credentials", {
      success: Data(NativeCredentials),
      error: SelfErrors
    }),
    HttpApiEndpoint.post("resetExternalPassword", "/v1/softphone/external/reset-password", {
      success: Data(NativeCredentials),
      error: [...SelfErrors, BadGateway]
    }),
    HttpApiEndpoint.get("colleagues", "/v1/softphone/colleagues", {
      success: Data(Schema.Array(Colleague)),
      error: SelfErrors
    }),
    HttpApiEndpoint.post("internalCall", "/v1/softphone/internal-call", {
      payload: InternalCall,
      success: Data(CallStarted).pipe(HttpApiSchema.status(202)),
      error: [...SelfErrors, BadGateway]
    }),
    HttpApiEndpoint.post("externalCall", "/v1/softphone/external-call", {
      payload: ExternalCall,
      success: Data(CallStarted).pipe(HttpApiSchema.status(202)),
      error: [...SelfErrors, BadGateway]
    })
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Softphone",
    description: "The operator's own SIP profiles and calls. Session or mobile token only: service accounts and company tokens get 403."
  }))
{}

import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { AuthErrors, BadGateway, Conflict, ServiceUnavailable, Unprocessable } from "../platform/Errors.ts"
import {
  Availability,
  ChangePassword,
  PhoneCodeSent,
  PhoneVerified,
  Profile,
  SetAvailability,
  SwitchCompany,
  UpdateProfile,
  VerifyPhone
} from "./Domain.ts"
import { Data } from "../platform/Envelope.ts"

const ProfileBody = Data(Profile)

export class MeApi extends HttpApiGroup.make("me")
  .add(
    HttpApiEndpoint.get("get", "/v1/me", {
      success: ProfileBody,
      error: AuthErrors
    }),
    HttpApiEndpoint.post("update", "/v1/me", {
      payload: UpdateProfile,
      success: ProfileBody,
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Partial update of name, lastname, phone (E.164; null or \"\" removes it), timezone (IANA), locale and " +
        "photo_media_id (an image from `POST /v1/uploads` in the active company; null removes the photo). " +
        "A changed phone clears phone_verified."
    })),
    HttpApiEndpoint.post("changePassword", "/v1/me/password", {
      payload: ChangePassword,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Needs the current password. Ends every other session and mobile token of the account; the calling one stays. Sessions and mobile tokens only."
    })),
    HttpApiEndpoint.put("setAvailability", "/v1/me/availability", {
      payload: SetAvailability,
      success: Data(Availability),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "`status` is online, away or offline; busy is derived by the system and refused with 422."
    })),
    HttpApiEndpoint.put("switchCompany", "/v1/me/current-company", {
      payload: SwitchCompany,
      success: ProfileBody,
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Sets the account's single current_company_id (all sessions and tokens follow it). 422 on company_id without a membership; 403 for service accounts."
    })),
    HttpApiEndpoint.post("sendPhoneCode", "/v1/me/phone/send-otp", {
      success: Data(PhoneCodeSent),
      error: [...AuthErrors, Unprocessable, BadGateway, ServiceUnavailable]
    }).annotateMerge(OpenApi.annotations({
      description: "Sends a 6-digit code (valid 600 s) to the saved number. 422 without an E.164 number, 429 beyond the send limits, 502 when the SMS gateway fails, 503 when the platform's daily budget is spent. Sessions and mobile tokens only."
    })),
    HttpApiEndpoint.post("verifyPhone", "/v1/me/phone/verify", {
      payload: VerifyPhone,
      success: Data(PhoneVerified),
      error: [...AuthErrors, Unprocessable, Conflict]
    }).annotateMerge(OpenApi.annotations({
      description: "422 for a wrong or expired code, 409 when the number changed since sending, 429 when the code's attempts are used up. Sessions and mobile tokens only."
    }))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Current user" }))
{}

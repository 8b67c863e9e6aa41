import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { AuthErrors, CsrfMismatch, TooManyRequests, Unprocessable } from "../platform/Errors.ts"
import { Authentication } from "./Middleware.ts"
import { Data } from "../platform/Envelope.ts"

const Email = Schema.String.check(
  Schema.isMinLength(1, { message: "The email field is required." }),
  Schema.isMaxLength(255, { message: "The email field must not be greater than 255 characters." })
)
const Password = Schema.String.check(
  Schema.isMinLength(1, { message: "The password field is required." }),
  Schema.isMaxLength(256, { message: "The password field must not be greater than 256 characters." })
)
const DeviceName = Schema.String.check(
  Schema.isMinLength(1, { message: "The device name field is required." }),
  Schema.isMaxLength(100, { message: "The device name field must not be greater than 100 characters." })
)

export const LoginPayload = Schema.Struct({ email: Email, password: Password })
export const MobileLoginPayload = Schema.Struct({ email: Email, password: Password, device_name: DeviceName })
export const VerifyCodePayload = Schema.Struct({
  code: Schema.String.check(Schema.isPattern(/^\d{6}$/, { message: "The code field must be a 6-digit code." }))
})

const Message = Data(Schema.Struct({ message: Schema.String }))
const EmailStatus = Data(Schema.Struct({ message: Schema.String, email_verified: Schema.Boolean }))

export class AuthApi extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("verifyEmailCode", "/v1/auth/email/verify-code", {
      payload: VerifyCodePayload,
      success: EmailStatus,
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.post("resendEmailCode", "/v1/auth/email/resend-code", {
      success: EmailStatus,
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.post("logout", "/v1/auth/logout", {
      success: Message,
      error: AuthErrors
    })
  )
  // Only the endpoints above need a credential; the ones below are how one is obtained.
  .middleware(Authentication)
  .add(
    HttpApiEndpoint.get("csrfCookie", "/sanctum/csrf-cookie", {
      success: HttpApiSchema.NoContent
    }),
    HttpApiEndpoint.post("login", "/v1/auth/login", {
      payload: LoginPayload,
      success: Schema.Struct({
        data: Schema.Struct({
          message: Schema.String,
          user: Schema.Struct({ id: Schema.Int, email: Schema.String, name: Schema.String })
        })
      }),
      error: [Unprocessable, TooManyRequests, CsrfMismatch]
    }),
    HttpApiEndpoint.post("mobileLogin", "/v1/auth/mobile/login", {
      payload: MobileLoginPayload,
      success: Schema.Struct({
        data: Schema.Struct({ message: Schema.String, email_verified: Schema.Boolean, token: Schema.String })
      }),
      error: [Unprocessable, TooManyRequests]
    })
  )
  .annotateMerge(OpenApi.annotations({
    title: "Authentication",
    description: "Mobile login (bearer token), the web cabinet's session login, e-mail verification codes"
  }))
{}

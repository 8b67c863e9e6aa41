import { Schema } from "effect"

export const Profile = Schema.Struct({
  id: Schema.Int,
  name: Schema.String,
  lastname: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  email_verified: Schema.Boolean,
  phone: Schema.NullOr(Schema.String),
  phone_verified: Schema.Boolean,
  timezone: Schema.String,
  locale: Schema.String,
  availability: Schema.String,
  is_service_account: Schema.Boolean,
  current_company_id: Schema.NullOr(Schema.Int),
  roles: Schema.Array(Schema.String),
  permissions: Schema.Array(Schema.String),
  /** Signed link to `GET /v1/users/{id}/photo` made for the active company; null without a photo or an active company. */
  photo_url: Schema.NullOr(Schema.String)
}).annotate({ identifier: "Profile" })
export type Profile = typeof Profile.Type

const Text = (field: string, max: number) =>
  Schema.String.check(Schema.isMaxLength(max, { message: `The ${field} field must not be greater than ${max} characters.` }))

/** POST /v1/me: every field optional; `phone` null (or "") removes the number, `photo_media_id` null the photo. */
export const UpdateProfile = Schema.Struct({
  name: Schema.optionalKey(Text("name", 255).check(
    Schema.isPattern(/\S/, { message: "The name field must not be empty." })
  )),
  lastname: Schema.optionalKey(Schema.NullOr(Text("lastname", 255))),
  /** Parsed by the service: a national spelling is read in the active company's `default_country`. */
  phone: Schema.optionalKey(Schema.NullOr(Text("phone", 64))),
  timezone: Schema.optionalKey(Text("timezone", 64)),
  locale: Schema.optionalKey(Schema.String.check(
    Schema.isPattern(/^[A-Za-z]{2,3}([_-][A-Za-z0-9]{2,8}){0,3}$/, { message: "The locale must be a language tag such as en or pt-BR." })
  )),
  /** An image uploaded first (`POST /v1/uploads`) in the active company; null removes the photo. */
  photo_media_id: Schema.optionalKey(Schema.NullOr(Schema.Int))
})
export type UpdateProfile = typeof UpdateProfile.Type

export const ChangePassword = Schema.Struct({
  current_password: Schema.String.check(
    Schema.isMinLength(1, { message: "The current password field is required." }),
    Schema.isMaxLength(256, { message: "The current password field must not be greater than 256 characters." })
  ),
  password: Schema.String.check(
    Schema.isMinLength(8, { message: "The password must be at least 8 characters." }),
    Schema.isMaxLength(256, { message: "The password must not be greater than 256 characters." })
  )
})
export type ChangePassword = typeof ChangePassword.Type

/** `busy` is refused by the service with its own message, so the field is any string here. */
export const SetAvailability = Schema.Struct({ status: Schema.String })

export const Availability = Schema.Struct({ message: Schema.String, availability: Schema.String })

export const SwitchCompany = Schema.Struct({ company_id: Schema.Int })

export const PhoneCodeSent = Schema.Struct({ phone: Schema.String, expires_in: Schema.Int })

export const VerifyPhone = Schema.Struct({
  code: Schema.String.check(Schema.isPattern(/^\d{6}$/, { message: "The code field must be a 6-digit code." }))
})

export const PhoneVerified = Schema.Struct({ message: Schema.String, phone: Schema.String, phone_verified: Schema.Boolean })

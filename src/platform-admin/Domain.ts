import { Schema } from "effect"
import { Roles } from "../auth/Permissions.ts"
import { Plans } from "../auth/Plans.ts"
import { CountryCodeSchema } from "../platform/PhoneSchemas.ts"

export const Email = Schema.String.check(
  Schema.isMaxLength(255),
  Schema.isPattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/, { message: "The email field must be a valid email address." })
)
export const Password = Schema.String.check(
  Schema.isMinLength(8, { message: "The password field must be at least 8 characters." }),
  Schema.isMaxLength(256)
)
export const Name = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(255))
export const PlanSchema = Schema.Literals(Plans)
export const RoleSchema = Schema.Literals(Roles)
export const Currency = Schema.String.check(
  Schema.isPattern(/^[A-Z]{3}$/, { message: "The default currency field must be a 3-letter ISO 4217 code." })
)

/** `suspended`: the company's members and tokens get 403 (no active company) until it is `active` again. */
export const CompanyStatuses = ["active", "suspended"] as const
export const CompanyStatus = Schema.Literals(CompanyStatuses)

export const CompanyView = Schema.Struct({
  id: Schema.Int,
  name: Schema.String,
  plan: Schema.String,
  status: Schema.String,
  default_currency: Schema.NullOr(Schema.String),
  /** ISO 3166-1 alpha-2: national phone numbers are read in this country; null = international numbers only. */
  default_country: Schema.NullOr(Schema.String),
  telephony_enabled: Schema.Boolean,
  created_at: Schema.String
}).annotate({ identifier: "Company" })
export type CompanyView = typeof CompanyView.Type

export const CreateCompany = Schema.Struct({
  name: Name,
  plan: Schema.optional(PlanSchema),
  default_currency: Schema.optional(Currency),
  default_country: Schema.optional(CountryCodeSchema),
  telephony_enabled: Schema.optional(Schema.Boolean),
  admin: Schema.Struct({ email: Email, password: Password, name: Name })
})

export const UpdateCompany = Schema.Struct({
  name: Schema.optional(Name),
  plan: Schema.optional(PlanSchema),
  default_currency: Schema.optional(Schema.NullOr(Currency)),
  default_country: Schema.optional(Schema.NullOr(CountryCodeSchema)),
  status: Schema.optional(CompanyStatus),
  telephony_enabled: Schema.optional(Schema.Boolean)
})

export const AddUser = Schema.Struct({ email: Email, password: Password, name: Name, role: RoleSchema })

import { Schema } from "effect"

/** The user-facing refusal of a number `normalizePhone` does not accept. */
export const invalidPhoneMessage = (field: string, defaultCountry: string | null) =>
  defaultCountry === null
    ? `The ${field} must be a valid phone number with its country code, e.g. +14155550123.`
    : `The ${field} must be a valid phone number (international, or national in ${defaultCountry}).`

/**
 * What can be a phone number in some country (phone punctuation, 3 to 17 digits): checked by the
 * schema, so such a mistake is reported with the body's other field errors; `normalizePhone` decides the rest.
 */
export const phoneShape = (field: string) =>
  Schema.makeFilter((value: string) => {
    const digits = value.replace(/\D/g, "").length
    return (/^[\d\s().+\-/]*$/.test(value) && digits >= 3 && digits <= 17) || invalidPhoneMessage(field, null)
  })

export const countryCodeMessage = "The default country field must be an ISO 3166-1 alpha-2 country code such as US or DE."

/** ISO 3166-1 alpha-2 in upper case, e.g. `US`, `KZ`, `DE` (whether it is a country with phone metadata: `knownCountry`). */
export const CountryCodeSchema = Schema.String.check(Schema.isPattern(/^[A-Z]{2}$/, { message: countryCodeMessage }))

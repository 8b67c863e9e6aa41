import { type CountryCode, isSupportedCountry, parsePhoneNumberFromString } from "libphonenumber-js/max"
import { Schema } from "effect"

/**
 * The one reading of a typed phone number: E.164 when libphonenumber (full metadata) calls it a
 * valid number, undefined otherwise. A national spelling ("(415) 555-0123", "8 701 …") is read in
 * `defaultCountry` (the company's `default_country`); without one a number needs its country code,
 * given as `+`, `00` or bare leading digits.
 */
export const normalizePhone = (value: string, defaultCountry: string | null): string | undefined => {
  const trimmed = value.trim()
  if (trimmed === "" || trimmed.length > 64) return undefined
  const country = defaultCountry !== null && isSupportedCountry(defaultCountry) ? defaultCountry as CountryCode : undefined
  const read = (text: string) => {
    const parsed = parsePhoneNumberFromString(text, country === undefined ? undefined : { defaultCountry: country })
    return parsed !== undefined && parsed.isValid() ? parsed.number : undefined
  }
  if (country !== undefined) return read(trimmed)
  const compact = trimmed.replace(/[\s().-]/g, "")
  return read(compact.startsWith("00") ? `+${compact.slice(2)}` : compact.startsWith("+") ? compact : `+${compact}`)
}

/** The digits of a stored E.164 number, as providers that address by phone expect them. */
export const phoneDigits = (phone: string) => phone.replace(/\D/g, "")

/** The user-facing refusal of a number `normalizePhone` does not accept. */
export const invalidPhoneMessage = (field: string, defaultCountry: string | null) =>
  defaultCountry === null
    ? `The ${field} must be a valid phone number with its country code, e.g. +14155550123.`
    : `The ${field} must be a valid phone number (international, or national in ${defaultCountry}).`

/** ISO 3166-1 alpha-2 code that libphonenumber knows (upper case), e.g. `US`, `KZ`, `DE`. */
export const CountryCodeSchema = Schema.String.check(
  Schema.makeFilter((value: string) =>
    (/^[A-Z]{2}$/.test(value) && isSupportedCountry(value)) ||
    "The default country field must be an ISO 3166-1 alpha-2 country code such as US or DE."
  )
)

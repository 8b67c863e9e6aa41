import { invalidPhoneMessage } from "./PhoneSchemas.ts"
import { type CountryCode, isSupportedCountry, parsePhoneNumberFromString } from "libphonenumber-js/max"

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

export { invalidPhoneMessage } from "./PhoneSchemas.ts"

/** Whether libphonenumber has metadata for the ISO 3166-1 alpha-2 `code`. */
export const knownCountry = (code: string) => isSupportedCountry(code)


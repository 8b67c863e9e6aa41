const emailPattern = /([A-Za-z0-9._%+-])[A-Za-z0-9._%+-]*@([A-Za-z0-9.-]+\.[A-Za-z]{2,})/g
// A number written with its country code (+…), or a bare run of 9–15 digits; dates and ids stay readable.
const phonePattern = /\+\d[\d\s().-]{6,}\d|(?<!\d)\d{9,15}(?!\d)/g
const phoneKey = /phone/i
const emailKey = /e-?mail/i

const maskPhone = (s: string) => {
  const digits = s.replace(/\D/g, "")
  return digits.length < 4 ? "***" : `***${digits.slice(-2)}`
}
const maskEmails = (s: string) => s.replace(emailPattern, (_m, first: string, domain: string) => `${first}***@${domain}`)
const maskText = (s: string) => maskEmails(s).replace(phonePattern, maskPhone)

/**
 * The trigger payload as a run row shows it: phone numbers and e-mail addresses masked wherever they
 * appear (fields named after them, and inside any text), keeping enough to tell them apart.
 */
export const redact = (value: unknown, key = ""): unknown => {
  if (typeof value === "string") {
    if (phoneKey.test(key)) return maskPhone(value)
    if (emailKey.test(key)) return value.includes("@") ? maskEmails(value) : "***"
    return maskText(value)
  }
  if (Array.isArray(value)) return value.map((v) => redact(v, key))
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redact(v, phoneKey.test(k) || emailKey.test(k) ? k : emailKey.test(key) || phoneKey.test(key) ? key : k)]))
  }
  return value
}

import { createHash, randomBytes } from "node:crypto"
import { defaultOptOutText } from "./Domain.ts"

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/** A random click code: 12 base62 characters (≈ 71 bits). */
export const clickCode = () => {
  const bytes = randomBytes(12)
  let code = ""
  for (const byte of bytes) code += base62[byte % 62]
  return code
}

/** The variant of a contact in a broadcast: the same pair always gives the same index. */
export const variantIndex = (broadcastId: number, contactId: number, count: number) => {
  const digest = createHash("sha256").update(`${broadcastId}:${contactId}`).digest()
  return digest.readUInt32BE(0) % count
}

export interface ContactVars {
  readonly first_name: string | null
  readonly last_name: string | null
  readonly display_name: string | null
  readonly company_name: string | null
}

/** `{{first_name}}`-style variables from the contact; an unknown or empty one becomes "". */
export const render = (text: string, contact: ContactVars) =>
  text.replace(/\{\{\s*([a-z_]+)\s*\}\}/g, (_, name: string) =>
    name in contact ? (contact[name as keyof ContactVars] ?? "") : "")

const link = /https?:\/\/[^\s<>"']+[^\s<>"'.,;:!?)\]]/g

/** Every http(s) link replaced by `{appUrl}/r/{code}`; the pairs are what to store. */
export const trackLinks = (text: string, appUrl: string) => {
  const links: Array<{ readonly code: string; readonly url: string }> = []
  const out = text.replace(link, (url) => {
    const code = clickCode()
    links.push({ code, url })
    return `${appUrl.replace(/\/$/, "")}/r/${code}`
  })
  return { text: out, links }
}

export const withOptOut = (text: string, settings: { readonly includeOptOut?: boolean | undefined; readonly optOutText?: string | null | undefined } | undefined) =>
  settings?.includeOptOut === true ? `${text}\n\n${settings.optOutText?.trim() || defaultOptOutText}` : text

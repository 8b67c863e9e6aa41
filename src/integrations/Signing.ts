import { createHmac, createSecretKey, type KeyObject, randomBytes } from "node:crypto"
import type { Secrets, WebhookSettings } from "./Domain.ts"

/** Standard Webhooks keys: `whsec_` and the base64 of 24 to 64 random bytes. */
export const generateSigningSecret = (): string => `whsec_${randomBytes(32).toString("base64")}`

export const isSigningSecret = (value: string): boolean => {
  const match = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(value)
  if (match === null) return false
  const bytes = Buffer.from(match[1], "base64").length
  return bytes >= 24 && bytes <= 64
}

// An HMAC keyed by raw bytes imports the key on every call, several times the cost of the hash itself
// for a webhook body; a key object made once per secret is not.
const keys = new Map<string, KeyObject>()
const keyOf = (secret: string): KeyObject => {
  let key = keys.get(secret)
  if (key === undefined) {
    if (keys.size >= 10_000) keys.clear()
    key = createSecretKey(Buffer.from(secret.slice("whsec_".length), "base64"))
    keys.set(secret, key)
  }
  return key
}

/** `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed by the secret's decoded bytes. */
export const sign = (secret: string, id: string, timestampSeconds: number, body: string): string =>
  `v1,${createHmac("sha256", keyOf(secret)).update(`${id}.${timestampSeconds}.${body}`).digest("base64")}`

/**
 * The body: the event envelope of replay and realtime (`id`, `seq`, `event`, `company_id`, `occurred_at`,
 * `data`), its `id` also the `webhook-id`. `data` is spliced in as stored, so retries send the same bytes.
 */
export const envelope = (event: {
  readonly id: string
  readonly seq: number
  readonly event: string
  readonly companyId: number
  readonly occurredAt: string
  readonly dataJson: string
}): string =>
  `{"id":${JSON.stringify(event.id)},"seq":${event.seq},"event":${JSON.stringify(event.event)},"company_id":${event.companyId},` +
  `"occurred_at":${JSON.stringify(event.occurredAt)},"data":${event.dataJson}}`

export const deliveryHeaders = (
  settings: Pick<WebhookSettings, "signatureHeader" | "authType">,
  secrets: Secrets,
  id: string,
  timestampSeconds: number,
  body: string
): Record<string, string> => {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "user-agent": "crm-webhooks/1",
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds)
  }
  if (secrets.signingSecret !== undefined) {
    headers[settings.signatureHeader.toLowerCase()] = sign(secrets.signingSecret, id, timestampSeconds, body)
  }
  if (settings.authType === "bearer" && secrets.bearerToken !== undefined) {
    headers.authorization = `Bearer ${secrets.bearerToken}`
  } else if (settings.authType === "basic" && secrets.basicUsername !== undefined && secrets.basicPassword !== undefined) {
    headers.authorization = `Basic ${Buffer.from(`${secrets.basicUsername}:${secrets.basicPassword}`).toString("base64")}`
  }
  return headers
}

/**
 * Seconds to wait after the n-th failed attempt (n from 1): 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h,
 * 6 h, 12 h, then 12 h again. The nine steps add up to 22.7 h, ten to 34.7 h (maxAttempts 11), about a
 * day and a half; the default maxAttempts 8 retries for 4.7 h, the maximum 15 for 82.7 h.
 */
export const backoffSchedule: ReadonlyArray<number> = [5, 30, 120, 600, 1800, 3600, 10800, 21600, 43200]

/**
 * The wait after the n-th failure in milliseconds: the schedule's step with ±20% jitter (`random` in
 * [0, 1)), so receivers coming back from an outage are not hit by every sender in the same second.
 */
export const backoffMillis = (failedAttempt: number, random: number, scale = 1): number => {
  const step = backoffSchedule[Math.min(Math.max(failedAttempt, 1), backoffSchedule.length) - 1]
  return Math.round(step * 1000 * scale * (0.8 + 0.4 * random))
}

import { Clock, Context, Effect, Layer, Option, Redacted } from "effect"
import { HttpServerRequest } from "effect/http"
import { SqlClient } from "effect/sql"
import { createHmac, hkdfSync, randomBytes } from "node:crypto"
import { AppConfig } from "../Config.ts"
import { safeEqualString } from "../Crypto.ts"
import { Forbidden, TooManyRequests } from "../Errors.ts"
import { clientIp } from "../HttpKernel.ts"
import { RateLimiter } from "../RateLimiter.ts"

const keySetting = "signed_urls_key"

/** Spec limit on signed media: 2000 requests a minute per client IP. */
export const signedRouteRule = { limit: 2000, windowSeconds: 60 } as const

export const invalidSignature = () => new Forbidden({ message: "Invalid signature." })

/** The signing key when `APP_KEY` is set: HKDF-SHA256 of it, so rotating `APP_KEY` revokes every link. */
export const deriveKey = (appKey: string): Uint8Array => new Uint8Array(hkdfSync("sha256", appKey, "crm", "signed-urls", 32))

/** Path plus the query without `signature`, keys sorted: what the HMAC covers. */
const canonical = (path: string, params: URLSearchParams) => {
  const entries = [...params.entries()].filter(([k]) => k !== "signature").sort(([a, av], [b, bv]) =>
    a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0
  )
  const query = new URLSearchParams(entries).toString()
  return query === "" ? path : `${path}?${query}`
}

/**
 * Links that carry their own authorization (sticker files, attachment media): an HMAC-SHA256
 * over the path and query, keyed from `APP_KEY` (else a key generated once into
 * `app_settings`). A link without `expires` is permanent until the key changes.
 */
export class SignedUrls extends Context.Service<SignedUrls, {
  /** Absolute URL (`APP_URL` + path) with `params`, `expires` (Unix seconds, when given) and `signature`. */
  sign(path: string, options?: { readonly params?: Record<string, string>; readonly expiresAt?: number }): string
  /** True when the path and query (as received, `?…` included) carry a valid, unexpired signature. */
  verify(pathAndQuery: string): Effect.Effect<boolean>
  /**
   * For a signed route's handler: the per-IP limit (429), then the signature of the current
   * request (403 `Invalid signature.`). Needs no Authorization header.
   */
  authorize: Effect.Effect<void, Forbidden | TooManyRequests, HttpServerRequest.HttpServerRequest>
}>()("crm/media/SignedUrls") {
  static readonly make = (key: Uint8Array, appUrl: string, limiter: RateLimiter["Service"]) => {
    const origin = appUrl.replace(/\/+$/, "")
    const mac = (value: string) => createHmac("sha256", key).update(value).digest("base64url")

    const sign = (path: string, options: { readonly params?: Record<string, string>; readonly expiresAt?: number } = {}) => {
      const params = new URLSearchParams(options.params ?? {})
      if (options.expiresAt !== undefined) params.set("expires", String(Math.floor(options.expiresAt)))
      const signed = canonical(path, params)
      return `${origin}${signed}${signed.includes("?") ? "&" : "?"}signature=${mac(signed)}`
    }

    const verify = (pathAndQuery: string) =>
      Effect.gen(function*() {
        const at = pathAndQuery.indexOf("?")
        if (at < 0) return false
        const path = pathAndQuery.slice(0, at)
        const params = new URLSearchParams(pathAndQuery.slice(at + 1))
        const signatures = params.getAll("signature")
        if (signatures.length !== 1) return false
        const expires = params.get("expires")
        if (expires !== null) {
          if (!/^\d{1,12}$/.test(expires)) return false
          if (Number(expires) * 1000 < (yield* Clock.currentTimeMillis)) return false
        }
        return safeEqualString(signatures[0], mac(canonical(path, params)))
      })

    const authorize = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      yield* limiter.enforce("global", `signed:ip:${clientIp(request)}`, signedRouteRule)
      if (!(yield* verify(request.url))) return yield* invalidSignature()
    })

    return SignedUrls.of({ sign, verify, authorize })
  }

  static readonly layer = Layer.effect(
    SignedUrls,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const limiter = yield* RateLimiter
      if (Option.isSome(config.signingKey)) {
        return SignedUrls.make(deriveKey(Redacted.value(config.signingKey.value)), config.appUrl, limiter)
      }
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO app_settings (key, value) VALUES (${keySetting}, ${randomBytes(32).toString("base64")})
        ON CONFLICT (key) DO NOTHING`
      const rows = yield* sql<{ readonly value: string }>`SELECT value FROM app_settings WHERE key = ${keySetting}`
      return SignedUrls.make(new Uint8Array(Buffer.from(rows[0].value, "base64")), config.appUrl, limiter)
    }).pipe(Effect.orDie)
  )
}

import { Context, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto"
import { AppConfig } from "../platform/Config.ts"

const keySetting = "channel_credentials_key"
const version = 1
const ivLength = 12
const tagLength = 16

/** The credentials key when `APP_KEY` is set: HKDF-SHA256 of it, so the app key itself never encrypts data. */
export const deriveKey = (appKey: string): Uint8Array => new Uint8Array(hkdfSync("sha256", appKey, "crm", "channel-credentials", 32))

/**
 * Channel credentials at rest: AES-256-GCM, the company id as associated data so a
 * ciphertext copied to another tenant's row does not decrypt. The key is derived (HKDF)
 * from `APP_KEY`, else generated once into `app_settings` and shared by every runner.
 */
export class Credentials extends Context.Service<Credentials, {
  encrypt(companyId: number, credentials: Record<string, string>): Uint8Array
  /** None when the bytes do not decrypt (say, `APP_KEY` changed since they were written). */
  decrypt(companyId: number, bytes: Uint8Array): Option.Option<Record<string, string>>
}>()("crm/channels/Credentials") {
  static readonly make = (key: Uint8Array) => {
    const aad = (companyId: number) => Buffer.from(`company:${companyId}`)
    return Credentials.of({
      encrypt: (companyId, credentials) => {
        const iv = randomBytes(ivLength)
        const cipher = createCipheriv("aes-256-gcm", key, iv)
        cipher.setAAD(aad(companyId))
        const body = Buffer.concat([cipher.update(JSON.stringify(credentials), "utf8"), cipher.final()])
        return Buffer.concat([Buffer.from([version]), iv, cipher.getAuthTag(), body])
      },
      decrypt: (companyId, bytes) => {
        const buf = Buffer.from(bytes)
        if (buf.length < 1 + ivLength + tagLength || buf[0] !== version) return Option.none()
        const decipher = createDecipheriv("aes-256-gcm", key, buf.subarray(1, 1 + ivLength))
        decipher.setAAD(aad(companyId))
        decipher.setAuthTag(buf.subarray(1 + ivLength, 1 + ivLength + tagLength))
        return Option.liftThrowable(() => {
          const plain = Buffer.concat([decipher.update(buf.subarray(1 + ivLength + tagLength)), decipher.final()])
          return JSON.parse(plain.toString("utf8")) as Record<string, string>
        })()
      }
    })
  }

  static readonly layer = Layer.effect(
    Credentials,
    Effect.gen(function*() {
      const config = yield* AppConfig
      if (Option.isSome(config.signingKey)) {
        return Credentials.make(deriveKey(Redacted.value(config.signingKey.value)))
      }
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO app_settings (key, value) VALUES (${keySetting}, ${randomBytes(32).toString("base64")})
        ON CONFLICT (key) DO NOTHING`
      const rows = yield* sql<{ readonly value: string }>`SELECT value FROM app_settings WHERE key = ${keySetting}`
      return Credentials.make(new Uint8Array(Buffer.from(rows[0].value, "base64")))
    }).pipe(Effect.orDie)
  )
}

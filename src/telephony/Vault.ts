import { Context, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { randomToken, sha256 } from "../platform/Crypto.ts"
import { TelephonyConfig } from "./Config.ts"

const keySetting = "telephony_sip_secret_key"
const version = "v1"

/**
 * SIP passwords must be shown again (credentials endpoints), so they are stored
 * encrypted (AES-256-GCM), not hashed. The associated data binds a ciphertext to its
 * row and profile, so a value copied into another row does not decrypt.
 */
export class SipVault extends Context.Service<SipVault, {
  seal(plaintext: string, context: string): string
  open(sealed: string, context: string): Effect.Effect<string>
}>()("crm/telephony/SipVault") {
  static readonly make = (secret: string) => {
    const key = sha256(`sip-vault:${secret}`)
    return SipVault.of({
      seal: (plaintext, context) => {
        const iv = randomBytes(12)
        const cipher = createCipheriv("aes-256-gcm", key, iv)
        cipher.setAAD(Buffer.from(context))
        const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
        return [version, iv, cipher.getAuthTag(), body].map((part) => typeof part === "string" ? part : part.toString("base64url")).join(".")
      },
      open: (sealed, context) =>
        Effect.try({
          try: () => {
            const [v, iv, tag, body] = sealed.split(".")
            if (v !== version || body === undefined) throw new Error("unknown SIP secret format")
            const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64url"))
            decipher.setAAD(Buffer.from(context))
            decipher.setAuthTag(Buffer.from(tag, "base64url"))
            return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString("utf8")
          },
          catch: (cause) => cause
        }).pipe(Effect.orDie)
    })
  }

  static readonly layer = Layer.effect(
    SipVault,
    Effect.gen(function*() {
      const config = yield* TelephonyConfig
      if (Option.isSome(config.secretKey)) return SipVault.make(Redacted.value(config.secretKey.value))
      const sql = yield* SqlClient.SqlClient
      yield* sql`
        INSERT INTO app_settings (key, value) VALUES (${keySetting}, ${randomToken(48)})
        ON CONFLICT (key) DO NOTHING`
      const rows = yield* sql<{ readonly value: string }>`SELECT value FROM app_settings WHERE key = ${keySetting}`
      return SipVault.make(rows[0].value)
    }).pipe(Effect.orDie)
  )
}

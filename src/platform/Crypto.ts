import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto"

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

/** Uniform random string over [A-Za-z0-9] (rejection sampling, no modulo bias). */
export const randomToken = (length: number): string => {
  let out = ""
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += alphabet[byte % 62]
      if (out.length === length) break
    }
  }
  return out
}

export const sha256 = (value: string): Buffer => createHash("sha256").update(value).digest()

export const hmacHex = (key: string, value: string): string => createHmac("sha256", key).update(value).digest("hex")

export const safeEqual = (a: Buffer | Uint8Array, b: Buffer | Uint8Array): boolean =>
  a.length === b.length && timingSafeEqual(a, b)

export const safeEqualString = (a: string, b: string): boolean => safeEqual(Buffer.from(a), Buffer.from(b))

export const randomDigits = (length: number): string => {
  let out = ""
  for (const byte of randomBytes(length * 2)) {
    if (byte < 250) out += String(byte % 10)
    if (out.length === length) break
  }
  return out.length === length ? out : randomDigits(length)
}

import { Context, Effect, Layer, Option, Redacted } from "effect"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { AppConfig } from "../platform/Config.ts"
import { SqlClient } from "effect/sql"
import { randomToken, safeEqual, safeEqualString, sha256 } from "../platform/Crypto.ts"
import { log } from "../platform/Logging.ts"

/**
 * The platform operator's key. Embedded mode makes one at first start and keeps
 * it under the data directory; server mode has none unless PLATFORM_API_KEY is set.
 */
export class PlatformKey extends Context.Service<PlatformKey, Option.Option<Redacted.Redacted<string>>>()(
  "crm/platform-admin/PlatformKey"
) {
  static readonly layer = Layer.effect(
    PlatformKey,
    Effect.gen(function*() {
      const config = yield* AppConfig
      if (Option.isSome(config.platformApiKey)) return config.platformApiKey
      if (Option.isSome(config.databaseUrl)) {
        log.warn("PLATFORM_API_KEY is not set: the platform API (/platform/v1) answers 503")
        return Option.none()
      }
      if (config.dataDir === "memory://") return Option.some(Redacted.make(randomToken(40)))
      const file = `${config.dataDir}/platform-api-key`
      if (!existsSync(file)) {
        mkdirSync(config.dataDir, { recursive: true })
        writeFileSync(file, randomToken(40), { mode: 0o600 })
        log.info({ file }, "generated a platform API key")
      }
      const key = readFileSync(file, "utf8").trim()
      log.info({ file }, `platform API key: ${key}`)
      return Option.some(Redacted.make(key))
    })
  )
}

/**
 * The platform key in force: the configured one (PLATFORM_API_KEY or the embedded key file) until it
 * is rotated. A rotation is recorded in `app_settings` under the configured key's hash (only the
 * new key's hash is stored), so every runner sees it at once, and an operator who configures a
 * different key starts afresh. Embedded mode also writes the new key to its key file.
 */
export class PlatformKeyRing extends Context.Service<PlatformKeyRing, {
  check(credential: string): Effect.Effect<"ok" | "refused" | "disabled">
  rotate: Effect.Effect<string>
}>()("crm/platform-admin/PlatformKeyRing") {
  static readonly layer = Layer.effect(
    PlatformKeyRing,
    Effect.gen(function*() {
      const configured = yield* PlatformKey
      const config = yield* AppConfig
      const sql = yield* SqlClient.SqlClient
      const setting = Option.map(configured, (key) => `platform_api_key_rotated:${sha256(Redacted.value(key)).toString("hex")}`)

      const rotatedHash = (name: string) =>
        sql<{ value: string }>`SELECT value FROM app_settings WHERE key = ${name}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0]?.value)),
          Effect.orDie
        )

      const check = Effect.fn("PlatformKeyRing.check")(function*(credential: string) {
        if (Option.isNone(configured) || Option.isNone(setting)) return "disabled" as const
        const rotated = yield* rotatedHash(setting.value)
        const ok = Option.isSome(rotated)
          ? safeEqual(sha256(credential), Buffer.from(rotated.value, "hex"))
          : safeEqualString(credential, Redacted.value(configured.value))
        return ok ? "ok" as const : "refused" as const
      })

      // Rotation is reached only through a route the configured key authenticated, so a key is in force.
      const rotate = Effect.gen(function*() {
        if (Option.isNone(setting)) return yield* Effect.die(new Error("the platform key is rotated only when one is configured"))
        const name = setting.value
        const key = randomToken(40)
        const hash = sha256(key).toString("hex")
        yield* sql`
          INSERT INTO app_settings (key, value) VALUES (${name}, ${hash})
          ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`.pipe(Effect.orDie)
        if (Option.isNone(config.databaseUrl) && config.dataDir !== "memory://" && Option.isNone(config.platformApiKey)) {
          writeFileSync(`${config.dataDir}/platform-api-key`, key, { mode: 0o600 })
        }
        log.info("platform API key rotated")
        return key
      }).pipe(Effect.withSpan("PlatformKeyRing.rotate"))

      return PlatformKeyRing.of({ check, rotate })
    })
  ).pipe(Layer.provide(PlatformKey.layer))
}

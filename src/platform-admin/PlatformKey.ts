import { Context, Effect, Layer, Option, Redacted } from "effect"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { AppConfig } from "../platform/Config.ts"
import { randomToken } from "../platform/Crypto.ts"
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

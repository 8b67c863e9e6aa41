import { Config, Context, Effect, Layer, Option, Redacted } from "effect"

export interface TelephonyConfigShape {
  readonly sipHost: string
  readonly wssUrl: string
  readonly mediaEncryption: string
  /** Calls per user and window, shared by internal and external calls (spec: 20 per minute). */
  readonly originateLimit: number
  readonly originateWindowSeconds: number
  /** Key material for the SIP passwords at rest; when unset, one generated once and kept in `app_settings`. */
  readonly secretKey: Option.Option<Redacted.Redacted>
}

const config = Config.all({
  sipHost: Config.String("SIP_HOST").pipe(Config.withDefault("sip.localhost")),
  wssUrl: Config.option(Config.String("SIP_WSS_URL")),
  mediaEncryption: Config.String("SIP_MEDIA_ENCRYPTION").pipe(Config.withDefault("none")),
  originateLimit: Config.Int("CALL_ORIGINATE_LIMIT").pipe(Config.withDefault(20)),
  originateWindowSeconds: Config.Int("CALL_ORIGINATE_WINDOW_SECONDS").pipe(Config.withDefault(60)),
  secretKey: Config.option(Config.Redacted("SIP_SECRET_KEY"))
})

export class TelephonyConfig extends Context.Service<TelephonyConfig, TelephonyConfigShape>()("crm/telephony/TelephonyConfig") {
  static readonly layer = Layer.effect(
    TelephonyConfig,
    Effect.gen(function*() {
      const c = yield* config
      return TelephonyConfig.of({
        ...c,
        wssUrl: Option.getOrElse(c.wssUrl, () => `wss://${c.sipHost}:8089/ws`)
      })
    })
  )
}

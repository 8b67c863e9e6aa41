import { Config, Context, Effect, Layer, Option, Redacted } from "effect"

export type PbxAdapter = "in-process" | "kamailio"

export interface TelephonyConfigShape {
  /** `in-process` (default, embedded mode): profiles live in this process only; `kamailio`: a real SIP server. */
  readonly pbx: PbxAdapter
  readonly sipHost: string
  /** When set, each company is the SIP domain `c<company id>.<sipDomain>` (PBX=kamailio needs it). */
  readonly sipDomain: Option.Option<string>
  readonly tcpPort: number
  readonly tlsPort: number
  readonly wssUrl: string
  readonly mediaEncryption: string
  /** Calls per user and window, shared by internal and external calls (spec: 20 per minute). */
  readonly originateLimit: number
  readonly originateWindowSeconds: number
  /** Key material for the SIP passwords at rest; when unset, one generated once and kept in `app_settings`. */
  readonly secretKey: Option.Option<Redacted.Redacted>
  /** Kamailio's JSON-RPC endpoint (jsonrpcs over xhttp), reachable from the API only. */
  readonly kamailioRpcUrl: string
  readonly kamailioRpcTimeoutMs: number
  /** How Kamailio reaches itself: the outbound proxy of the calls it originates (`dlg.bridge_dlg`). */
  readonly kamailioSelfUri: string
  /** How often a runner folds Kamailio's reported call events into `call_attempts`. */
  readonly callEventsPollMs: number
}

const config = Config.all({
  pbx: Config.Literals(["in-process", "kamailio"], "PBX").pipe(Config.withDefault("in-process" as const)),
  sipHost: Config.String("SIP_HOST").pipe(Config.withDefault("sip.localhost")),
  sipDomain: Config.option(Config.String("SIP_DOMAIN")),
  publicHost: Config.option(Config.String("SIP_PUBLIC_HOST")),
  tcpPort: Config.Int("SIP_TCP_PORT").pipe(Config.withDefault(5060)),
  tlsPort: Config.Int("SIP_TLS_PORT").pipe(Config.withDefault(5061)),
  wssUrl: Config.option(Config.String("SIP_WSS_URL")),
  mediaEncryption: Config.String("SIP_MEDIA_ENCRYPTION").pipe(Config.withDefault("none")),
  originateLimit: Config.Int("CALL_ORIGINATE_LIMIT").pipe(Config.withDefault(20)),
  originateWindowSeconds: Config.Int("CALL_ORIGINATE_WINDOW_SECONDS").pipe(Config.withDefault(60)),
  secretKey: Config.option(Config.Redacted("SIP_SECRET_KEY")),
  kamailioRpcUrl: Config.String("KAMAILIO_RPC_URL").pipe(Config.withDefault("http://127.0.0.1:5090/RPC")),
  kamailioRpcTimeoutMs: Config.Int("KAMAILIO_RPC_TIMEOUT_MS").pipe(Config.withDefault(1500)),
  kamailioSelfUri: Config.String("KAMAILIO_SELF_URI").pipe(Config.withDefault("sip:127.0.0.1:5060")),
  callEventsPollMs: Config.Int("CALL_EVENTS_POLL_MS").pipe(Config.withDefault(1000))
})

/** The SIP host (and realm) a company's phones register at: its own domain when SIP_DOMAIN is set. */
export const companySipHost = (config: TelephonyConfigShape, companyId: number) =>
  Option.match(config.sipDomain, { onNone: () => config.sipHost, onSome: (domain) => `c${companyId}.${domain}` })

export class TelephonyConfig extends Context.Service<TelephonyConfig, TelephonyConfigShape>()("crm/telephony/TelephonyConfig") {
  static readonly layer = Layer.effect(
    TelephonyConfig,
    Effect.gen(function*() {
      const { publicHost, ...c } = yield* config
      if (c.pbx === "kamailio" && Option.isNone(c.sipDomain)) {
        return yield* Effect.die(new Error("PBX=kamailio needs SIP_DOMAIN (companies register at c<id>.<SIP_DOMAIN>)."))
      }
      const server = Option.getOrElse(publicHost, () => c.sipHost)
      return TelephonyConfig.of({
        ...c,
        wssUrl: Option.getOrElse(c.wssUrl, () => `wss://${server}:8089/ws`)
      })
    })
  )
}

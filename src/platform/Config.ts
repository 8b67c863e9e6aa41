import { Config, Context, Effect, Layer, Option, Redacted } from "effect"

export interface AppConfigShape {
  readonly host: string
  readonly port: number
  readonly realtimePort: number
  readonly databaseUrl: Option.Option<Redacted.Redacted>
  readonly dataDir: string
  readonly storageDir: string
  /** ffmpeg for voice notes: FFMPEG_PATH, else `ffmpeg` on PATH, else the `@ffmpeg-installer/ffmpeg` binary. */
  readonly ffmpegPath: Option.Option<string>
  readonly appUrl: string
  readonly platformApiKey: Option.Option<Redacted.Redacted>
  readonly signingKey: Option.Option<Redacted.Redacted>
  readonly pusherAppKey: string
  /** When unset, a secret generated once and shared by every runner through `app_settings`. */
  readonly pusherAppSecret: Option.Option<Redacted.Redacted>
  readonly rateLimitPerWindow: number
  readonly rateLimitWindowSeconds: number
  readonly loginAttempts: number
  readonly loginWindowSeconds: number
  readonly maxBodyBytes: number
  /** Message search and around: requests per minute per token or session user (spec: 120). */
  readonly heavyRateLimitPerMinute: number
  /** Provider webhooks (`/hooks/…`): requests per minute per channel and client IP. */
  readonly hooksRateLimitPerMinute: number
  /** Budget of one message search in PostgreSQL (statement_timeout); beyond it the search answers 503. */
  readonly searchTimeoutMs: number
  /** Message search counts matches up to this many; at the cap `total_matches` is a lower bound. */
  readonly searchCountCap: number
  readonly cluster: "single" | "socket"
  readonly runnerHost: string
  readonly runnerPort: number
  /** How often runners ping each other; a dead runner's shards move after about this plus 2.5 s of failed pings. */
  readonly runnerHealthCheckMs: number
  /** A runner whose heartbeat (every third of this) is older than this is gone: its shards move to the others. */
  readonly clusterLeaseMs: number
  readonly logLevel: string
  readonly mobileTokenDays: number
  readonly passwordHashConcurrency: number
  readonly realtimeMaxBackpressureBytes: number
  readonly realtimeDisabled: boolean
  /** SMS port: `outbox` keeps messages in `outbound_sms`; `fail` makes every send fail (502 drills). */
  readonly smsMode: "outbox" | "fail"
  /** Platform-wide phone codes per UTC day; beyond it send-otp answers 503. */
  readonly smsDailyBudget: number
  readonly phoneCodeResendSeconds: number
  readonly phoneCodeSendsPerHour: number
  readonly phoneCodeVerifyAttempts: number
  /** Provider API roots (tests point them at local fakes). */
  readonly telegramApiBase: string
  readonly whatsappApiBase: string
  readonly providerTimeoutMs: number
  /** Contact photos from linked accounts' picture URLs: private and loopback hosts are refused unless set (tests, closed networks). */
  readonly photoFetchAllowPrivate: boolean
  /** Webhook URLs may be plain http (closed networks, tests); otherwise https only. */
  readonly webhookAllowHttp: boolean
  /** Webhook deliveries may reach loopback and private addresses (tests, closed networks). */
  readonly webhookAllowPrivate: boolean
  /** Multiplies the retry schedule (tests shrink it; 1 in production). */
  readonly webhookBackoffScale: number
  /** Added to a claimed batch's lease (its depth × timeoutSeconds): how much later a dead runner's deliveries are offered again. */
  readonly webhookLeaseMarginMs: number
  /** How often the delivery worker looks for due retries and missed events without a wake-up. */
  readonly webhookPollMs: number
  /** A request not answered by then gets 503 (multipart uploads excepted; downloads stream after the answer). */
  readonly requestDeadlineMs: number
  /**
   * Added to the deadline: how long an idempotency key may stay in progress before it counts as
   * abandoned by a dead process and is settled (must exceed PROVIDER_TIMEOUT_MS minus the deadline).
   */
  readonly idempotencyLeaseMs: number
  /** `smtp://user:pass@host:587` (STARTTLS when offered) or `smtps://…:465`; unset: mails are logged, code redacted. */
  readonly smtpUrl: Option.Option<Redacted.Redacted>
  /** The From of every mail, e.g. `"Acme CRM" <no-reply@acme.test>`. */
  readonly mailFrom: string
  /** How often the mail drain looks for due mails. */
  readonly mailPollMs: number
  /** First retry delay of a refused or failed send; doubles each attempt (capped at an hour). */
  readonly mailRetryBaseMs: number
  /** Attempts before a mail is marked failed. */
  readonly mailMaxAttempts: number
  /** Twilio Messages API: with an account SID the SMS port sends through it (else the outbox sandbox). */
  readonly twilioAccountSid: Option.Option<string>
  readonly twilioAuthToken: Option.Option<Redacted.Redacted>
  /** The sender: an E.164 number, or a Messaging Service SID (`MG…`). */
  readonly twilioFrom: string
  readonly twilioApiBase: string
  /** The old generation may grow this much past the live heap before a full collection (see `HeapPolicy.ts`); 0: V8's own policy. */
  readonly heapGrowingPercent: number
}

const config = Config.all({
  host: Config.String("HOST").pipe(Config.withDefault("0.0.0.0")),
  port: Config.Port("PORT").pipe(Config.withDefault(8080)),
  realtimePort: Config.Port("REALTIME_PORT").pipe(Config.withDefault(8081)),
  databaseUrl: Config.option(Config.Redacted("DATABASE_URL")),
  dataDir: Config.String("DATA_DIR").pipe(Config.withDefault("./data")),
  storageDir: Config.option(Config.String("STORAGE_DIR")),
  ffmpegPath: Config.option(Config.String("FFMPEG_PATH")),
  appUrl: Config.String("APP_URL").pipe(Config.withDefault("http://localhost:8080")),
  platformApiKey: Config.option(Config.Redacted("PLATFORM_API_KEY")),
  signingKey: Config.option(Config.Redacted("APP_KEY")),
  pusherAppKey: Config.String("PUSHER_APP_KEY").pipe(Config.withDefault("crm")),
  pusherAppSecret: Config.option(Config.Redacted("PUSHER_APP_SECRET")),
  rateLimitPerWindow: Config.Int("RATE_LIMIT_PER_WINDOW").pipe(Config.withDefault(3000)),
  rateLimitWindowSeconds: Config.Int("RATE_LIMIT_WINDOW_SECONDS").pipe(Config.withDefault(60)),
  loginAttempts: Config.Int("LOGIN_ATTEMPTS").pipe(Config.withDefault(5)),
  loginWindowSeconds: Config.Int("LOGIN_WINDOW_SECONDS").pipe(Config.withDefault(900)),
  maxBodyBytes: Config.Int("MAX_BODY_BYTES").pipe(Config.withDefault(1024 * 1024)),
  heavyRateLimitPerMinute: Config.Int("HEAVY_RATE_LIMIT_PER_MINUTE").pipe(Config.withDefault(120)),
  hooksRateLimitPerMinute: Config.Int("HOOKS_RATE_LIMIT_PER_MINUTE").pipe(Config.withDefault(6000)),
  searchTimeoutMs: Config.Int("SEARCH_TIMEOUT_MS").pipe(Config.withDefault(2000)),
  searchCountCap: Config.Int("SEARCH_COUNT_CAP").pipe(Config.withDefault(1000)),
  cluster: Config.option(Config.Literals(["single", "socket"], "CLUSTER")),
  runnerHost: Config.String("RUNNER_HOST").pipe(Config.withDefault("127.0.0.1")),
  runnerPort: Config.Port("RUNNER_PORT").pipe(Config.withDefault(34431)),
  runnerHealthCheckMs: Config.Int("RUNNER_HEALTH_CHECK_MS").pipe(Config.withDefault(2_000)),
  clusterLeaseMs: Config.Int("CLUSTER_LEASE_MS").pipe(Config.withDefault(15_000)),
  logLevel: Config.String("LOG_LEVEL").pipe(Config.withDefault("info")),
  mobileTokenDays: Config.Int("MOBILE_TOKEN_DAYS").pipe(Config.withDefault(90)),
  passwordHashConcurrency: Config.Int("PASSWORD_HASH_CONCURRENCY").pipe(Config.withDefault(2)),
  realtimeMaxBackpressureBytes: Config.Int("REALTIME_MAX_BACKPRESSURE_BYTES").pipe(Config.withDefault(1024 * 1024)),
  realtimeDisabled: Config.Boolean("REALTIME_DISABLED").pipe(Config.withDefault(false)),
  smsMode: Config.Literals(["outbox", "fail"], "SMS_MODE").pipe(Config.withDefault("outbox" as const)),
  smsDailyBudget: Config.Int("SMS_DAILY_BUDGET").pipe(Config.withDefault(10_000)),
  phoneCodeResendSeconds: Config.Int("PHONE_CODE_RESEND_SECONDS").pipe(Config.withDefault(60)),
  phoneCodeSendsPerHour: Config.Int("PHONE_CODE_SENDS_PER_HOUR").pipe(Config.withDefault(5)),
  phoneCodeVerifyAttempts: Config.Int("PHONE_CODE_VERIFY_ATTEMPTS").pipe(Config.withDefault(5)),
  telegramApiBase: Config.String("TELEGRAM_API_BASE").pipe(Config.withDefault("https://api.telegram.org")),
  whatsappApiBase: Config.String("WHATSAPP_API_BASE").pipe(Config.withDefault("https://graph.facebook.com/v21.0")),
  providerTimeoutMs: Config.Int("PROVIDER_TIMEOUT_MS").pipe(Config.withDefault(10_000)),
  photoFetchAllowPrivate: Config.Boolean("PHOTO_FETCH_ALLOW_PRIVATE").pipe(Config.withDefault(false)),
  webhookAllowHttp: Config.Boolean("WEBHOOK_ALLOW_HTTP").pipe(Config.withDefault(false)),
  webhookAllowPrivate: Config.Boolean("WEBHOOK_ALLOW_PRIVATE").pipe(Config.withDefault(false)),
  webhookBackoffScale: Config.Number("WEBHOOK_BACKOFF_SCALE").pipe(Config.withDefault(1)),
  webhookLeaseMarginMs: Config.Int("WEBHOOK_LEASE_MARGIN_MS").pipe(Config.withDefault(30_000)),
  webhookPollMs: Config.Int("WEBHOOK_POLL_MS").pipe(Config.withDefault(1_000)),
  requestDeadlineMs: Config.Int("REQUEST_DEADLINE_MS").pipe(Config.withDefault(30_000)),
  idempotencyLeaseMs: Config.Int("IDEMPOTENCY_LEASE_MS").pipe(Config.withDefault(10_000)),
  smtpUrl: Config.option(Config.Redacted("SMTP_URL")),
  mailFrom: Config.String("MAIL_FROM").pipe(Config.withDefault("CRM <no-reply@localhost>")),
  mailPollMs: Config.Int("MAIL_POLL_MS").pipe(Config.withDefault(1_000)),
  mailRetryBaseMs: Config.Int("MAIL_RETRY_BASE_MS").pipe(Config.withDefault(30_000)),
  mailMaxAttempts: Config.Int("MAIL_MAX_ATTEMPTS").pipe(Config.withDefault(8)),
  twilioAccountSid: Config.option(Config.String("TWILIO_ACCOUNT_SID")),
  twilioAuthToken: Config.option(Config.Redacted("TWILIO_AUTH_TOKEN")),
  twilioFrom: Config.String("TWILIO_FROM").pipe(Config.withDefault("")),
  twilioApiBase: Config.String("TWILIO_API_BASE").pipe(Config.withDefault("https://api.twilio.com")),
  heapGrowingPercent: Config.Int("HEAP_GROWING_PERCENT").pipe(Config.withDefault(50))
})

export class AppConfig extends Context.Service<AppConfig, AppConfigShape>()("crm/platform/AppConfig") {
  static readonly layer = Layer.effect(
    AppConfig,
    Effect.gen(function*() {
      const c = yield* config
      const server = Option.isSome(c.databaseUrl)
      return AppConfig.of({
        ...c,
        storageDir: Option.getOrElse(c.storageDir, () => `${c.dataDir}/files`),
        cluster: Option.getOrElse(c.cluster, () => (server ? "socket" : "single"))
      })
    })
  )

  static readonly layerWith = (overrides: Partial<AppConfigShape>) =>
    Layer.effect(
      AppConfig,
      Effect.gen(function*() {
        const base = yield* AppConfig
        return AppConfig.of({ ...base, ...overrides })
      })
    ).pipe(Layer.provide(AppConfig.layer))
}

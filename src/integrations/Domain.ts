import { Schema } from "effect"

export const IntegrationId = Schema.Int
export type IntegrationId = typeof IntegrationId.Type

export const IntegrationTypes = ["webhook"] as const
export const IntegrationType = Schema.Literals(IntegrationTypes)
export const IntegrationStatuses = ["active", "disabled"] as const
export const IntegrationStatus = Schema.Literals(IntegrationStatuses)
export type IntegrationStatus = typeof IntegrationStatus.Type

export const SecretNames = ["signingSecret", "bearerToken", "basicUsername", "basicPassword"] as const
export type SecretName = typeof SecretNames[number]
export type Secrets = Partial<Record<SecretName, string>>

/** The stored, complete settings of a webhook (defaults filled in). */
export const WebhookSettings = Schema.Struct({
  url: Schema.String,
  description: Schema.NullOr(Schema.String),
  signatureHeader: Schema.String,
  authType: Schema.NullOr(Schema.Literals(["bearer", "basic"])),
  selectedEventKeys: Schema.Array(Schema.String),
  channelFilter: Schema.Literals(["all", "selected"]),
  channelIds: Schema.Array(Schema.Int),
  timeoutSeconds: Schema.Int,
  retryEnabled: Schema.Boolean,
  maxAttempts: Schema.Int,
  concurrency: Schema.Int
})
export type WebhookSettings = typeof WebhookSettings.Type

export const settingsDefaults = {
  description: null,
  signatureHeader: "webhook-signature",
  authType: null,
  channelFilter: "all",
  channelIds: [],
  timeoutSeconds: 10,
  retryEnabled: true,
  maxAttempts: 8,
  concurrency: 4
} as const

const between = (field: string, minimum: number, maximum: number) =>
  Schema.Int.check(Schema.isBetween({ minimum, maximum }, { message: `The ${field} must be between ${minimum} and ${maximum}.` }))

// Header names are RFC 9110 tokens; the ones the delivery sets itself cannot carry the signature.
const headerToken = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$/
const reservedHeaders = new Set(["authorization", "content-type", "content-length", "host", "webhook-id", "webhook-timestamp", "user-agent", "connection", "transfer-encoding"])

/** What a client may send as settings: every field optional (PATCH merges, POST fills defaults). */
export const SettingsInput = Schema.Struct({
  url: Schema.optionalKey(Schema.String.check(Schema.isMaxLength(2000, { message: "The url must not be greater than 2000 characters." }))),
  description: Schema.optionalKey(Schema.NullOr(Schema.String.check(Schema.isMaxLength(500, { message: "The description must not be greater than 500 characters." })))),
  signatureHeader: Schema.optionalKey(Schema.String.check(
    Schema.makeFilter((s: string) => headerToken.test(s) && !reservedHeaders.has(s.toLowerCase()), {
      message: "The signature header must be a valid HTTP header name other than the ones the delivery sets."
    })
  )),
  authType: Schema.optionalKey(Schema.NullOr(Schema.Literals(["bearer", "basic", "none"]))),
  selectedEventKeys: Schema.optionalKey(Schema.Array(Schema.String).check(Schema.isMaxLength(200))),
  channelFilter: Schema.optionalKey(Schema.Literals(["all", "selected"])),
  channelIds: Schema.optionalKey(Schema.Array(Schema.Int).check(Schema.isMaxLength(500))),
  timeoutSeconds: Schema.optionalKey(between("timeout seconds", 1, 30)),
  retryEnabled: Schema.optionalKey(Schema.Boolean),
  maxAttempts: Schema.optionalKey(between("max attempts", 1, 15)),
  concurrency: Schema.optionalKey(between("concurrency", 1, 20))
})
export type SettingsInput = typeof SettingsInput.Type

const secret = Schema.optionalKey(Schema.NullOr(Schema.String.check(Schema.isMaxLength(1000))))

/** Secrets in: a string sets one, null removes it, a missing key keeps it. */
export const SecretsInput = Schema.Struct({
  signingSecret: secret,
  bearerToken: secret,
  basicUsername: secret,
  basicPassword: secret
})
export type SecretsInput = typeof SecretsInput.Type

const Name = Schema.String.check(
  Schema.isPattern(/\S/, { message: "The name field is required." }),
  Schema.isMaxLength(150, { message: "The name must not be greater than 150 characters." })
)

export const CreateIntegration = Schema.Struct({
  type: IntegrationType,
  name: Name,
  status: Schema.optionalKey(IntegrationStatus),
  settings: SettingsInput,
  secrets: Schema.optionalKey(SecretsInput)
})
export type CreateIntegration = typeof CreateIntegration.Type

export const UpdateIntegration = Schema.Struct({
  name: Schema.optionalKey(Name),
  status: Schema.optionalKey(IntegrationStatus),
  settings: Schema.optionalKey(SettingsInput),
  secrets: Schema.optionalKey(SecretsInput)
})
export type UpdateIntegration = typeof UpdateIntegration.Type

export const Health = Schema.Struct({
  last_success_at: Schema.NullOr(Schema.String),
  last_failure_at: Schema.NullOr(Schema.String),
  last_error: Schema.NullOr(Schema.String),
  consecutive_failures: Schema.Int
})

export const Credential = Schema.Struct({
  /** Which secrets are set; their values are never returned. */
  secrets: Schema.Struct({
    signingSecret: Schema.Boolean,
    bearerToken: Schema.Boolean,
    basicUsername: Schema.Boolean,
    basicPassword: Schema.Boolean
  }),
  expires_at: Schema.NullOr(Schema.String),
  last_refreshed_at: Schema.NullOr(Schema.String),
  rotated_at: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
})

export const Integration = Schema.Struct({
  id: IntegrationId,
  company_id: Schema.Int,
  type: IntegrationType,
  name: Schema.String,
  status: IntegrationStatus,
  health: Health,
  settings: WebhookSettings,
  credential: Credential,
  external_entities: Schema.Array(Schema.Unknown),
  mappings: Schema.Array(Schema.Unknown),
  funnel_mappings: Schema.Array(Schema.Unknown),
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "Integration" })

/**
 * The answer of a write that made the signing secret itself (none was given, or it was removed): the
 * secret is shown this once, the way a token is at its creation, so the receiver can verify deliveries.
 */
export const IntegrationWithSecret = Schema.Struct({
  ...Integration.fields,
  signing_secret: Schema.optionalKey(Schema.String)
}).annotate({ identifier: "IntegrationWithSecret" })
export type IntegrationWithSecret = typeof IntegrationWithSecret.Type
export type Integration = typeof Integration.Type

export const LogEntry = Schema.Struct({
  id: Schema.Int,
  level: Schema.Literals(["info", "error"]),
  code: Schema.String,
  message: Schema.String,
  context: Schema.Struct({
    event_key: Schema.String,
    status: Schema.String,
    status_code: Schema.NullOr(Schema.Int),
    duration_ms: Schema.Int,
    attempt: Schema.Int,
    webhook_id: Schema.String
  }),
  created_at: Schema.String
})
export type LogEntry = typeof LogEntry.Type

export const Provider = Schema.Struct({
  id: Schema.Int,
  key: Schema.String,
  name: Schema.String,
  description: Schema.String,
  is_published: Schema.Boolean,
  created_at: Schema.String,
  updated_at: Schema.String
}).annotate({ identifier: "IntegrationProvider" })
export type Provider = typeof Provider.Type

export const SummaryItem = Schema.Struct({ type: Schema.String, count: Schema.Int })

export const TestWebhookInput = Schema.Struct({
  url: Schema.String.check(Schema.isMaxLength(2000)),
  settings: Schema.optionalKey(SettingsInput),
  secrets: Schema.optionalKey(SecretsInput),
  event_key: Schema.optionalKey(Schema.String)
})
export type TestWebhookInput = typeof TestWebhookInput.Type

export const TestWebhookResult = Schema.Struct({
  ok: Schema.Boolean,
  status_code: Schema.NullOr(Schema.Int),
  duration_ms: Schema.Int,
  error: Schema.optionalKey(Schema.String)
})
export type TestWebhookResult = typeof TestWebhookResult.Type

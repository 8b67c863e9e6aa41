import { Clock, Context, DateTime, Effect, Layer, Option, Result } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import { type CompanyId, type CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Catalog } from "../events/Catalog.ts"
import { AppConfig } from "../platform/Config.ts"
import { type Forbidden, invalidFields, type NotFound, notFound, type Unprocessable } from "../platform/Errors.ts"
import { OutboundHttp } from "../platform/OutboundHttp.ts"
import { Credentials } from "../providers/Credentials.ts"
import {
  type CreateIntegration,
  type Integration,
  type IntegrationWithSecret,
  type LogEntry,
  type Provider,
  SecretNames,
  type Secrets,
  type SecretsInput,
  type SettingsInput,
  settingsDefaults,
  type TestWebhookInput,
  type TestWebhookResult,
  type UpdateIntegration,
  type WebhookSettings
} from "./Domain.ts"
import { IntegrationsRepo, toIntegration } from "./Repo.ts"
import { deliveryHeaders, envelope, generateSigningSecret, isSigningSecret } from "./Signing.ts"

const integrationNotFound = () => notFound("Integration not found.")

const catalogKeys = new Set(Catalog.map((e) => e.key))

/** The one provider this API serves; CRM connectors with OAuth flows live in the dashboard. */
const providers: ReadonlyArray<Provider> = [{
  id: 1,
  key: "webhook",
  name: "Webhook",
  description: "Signed HTTP POSTs (Standard Webhooks) of the platform events you select, to a URL of yours.",
  is_published: true,
  created_at: "2026-01-01T00:00:00.000Z",
  updated_at: "2026-01-01T00:00:00.000Z"
}]

type Errors = Record<string, Array<string>>
const add = (errors: Errors, field: string, message: string) => (errors[field] ??= []).push(message)

/** Applies secrets input to the stored ones: a string sets, null removes, absent keeps. */
const mergeSecrets = (current: Secrets, input: SecretsInput | undefined, errors: Errors): Secrets => {
  const next: Record<string, string> = { ...current }
  for (const name of SecretNames) {
    const value = input?.[name]
    if (value === undefined) continue
    if (value === null || value === "") delete next[name]
    else next[name] = value
  }
  if (next.signingSecret !== undefined && !isSigningSecret(next.signingSecret)) {
    add(errors, "secrets.signingSecret", "The signing secret must be whsec_ followed by the base64 of 24 to 64 bytes.")
  }
  // Deliveries are always signed: a removed or missing key is replaced by a fresh one.
  if (next.signingSecret === undefined) next.signingSecret = generateSigningSecret()
  return next
}

/** The integration, with the signing secret when this write made it (shown once; never read back). */
const withMadeSecret = (integration: Integration, before: Secrets, after: Secrets, input: SecretsInput | undefined): IntegrationWithSecret =>
  after.signingSecret !== undefined && after.signingSecret !== before.signingSecret && input?.signingSecret !== after.signingSecret
    ? { ...integration, signing_secret: after.signingSecret }
    : integration

export const validateUrl = (url: string | undefined, allowHttp: boolean, field: string, errors: Errors) => {
  if (url === undefined || url.trim() === "") return add(errors, field, "The url field is required.")
  const parsed = URL.canParse(url) ? new URL(url) : null
  if (parsed === null || (parsed.protocol !== "https:" && parsed.protocol !== "http:") || parsed.hostname === "") {
    return add(errors, field, "The url must be a valid URL.")
  }
  if (parsed.protocol === "http:" && !allowHttp) add(errors, field, "The url must use https.")
  if (parsed.username !== "" || parsed.password !== "") add(errors, field, "The url must not carry credentials; use authType.")
}

/** The complete settings after `input` is applied to `base` (or the defaults), and what is wrong with them. */
const mergeSettings = (input: SettingsInput, base: WebhookSettings | null): WebhookSettings => {
  const authType = input.authType === undefined ? base?.authType ?? null : input.authType === "none" ? null : input.authType
  return {
    url: input.url ?? base?.url ?? "",
    description: input.description !== undefined ? input.description : base?.description ?? settingsDefaults.description,
    signatureHeader: input.signatureHeader ?? base?.signatureHeader ?? settingsDefaults.signatureHeader,
    authType,
    selectedEventKeys: input.selectedEventKeys ?? base?.selectedEventKeys ?? [],
    channelFilter: input.channelFilter ?? base?.channelFilter ?? settingsDefaults.channelFilter,
    channelIds: input.channelIds ?? base?.channelIds ?? [],
    timeoutSeconds: input.timeoutSeconds ?? base?.timeoutSeconds ?? settingsDefaults.timeoutSeconds,
    retryEnabled: input.retryEnabled ?? base?.retryEnabled ?? settingsDefaults.retryEnabled,
    maxAttempts: input.maxAttempts ?? base?.maxAttempts ?? settingsDefaults.maxAttempts,
    concurrency: input.concurrency ?? base?.concurrency ?? settingsDefaults.concurrency
  }
}

const checkAuth = (settings: Pick<WebhookSettings, "authType">, secrets: Secrets, errors: Errors) => {
  if (settings.authType === "bearer" && secrets.bearerToken === undefined) {
    add(errors, "secrets.bearerToken", "The bearer token is required when authType is bearer.")
  }
  if (settings.authType === "basic") {
    if (secrets.basicUsername === undefined) add(errors, "secrets.basicUsername", "The basic username is required when authType is basic.")
    if (secrets.basicPassword === undefined) add(errors, "secrets.basicPassword", "The basic password is required when authType is basic.")
  }
}

const names = (secrets: Secrets) => SecretNames.filter((name) => secrets[name] !== undefined)

export class Integrations extends Context.Service<Integrations, {
  list(filter: { readonly type?: string; readonly status?: string }): Effect.Effect<ReadonlyArray<Integration>, Forbidden, CurrentActor>
  get(id: number): Effect.Effect<Integration, Forbidden | NotFound, CurrentActor>
  create(input: CreateIntegration): Effect.Effect<IntegrationWithSecret, Forbidden | Unprocessable, CurrentActor>
  update(id: number, input: UpdateIntegration): Effect.Effect<IntegrationWithSecret, Forbidden | NotFound | Unprocessable, CurrentActor>
  delete(id: number): Effect.Effect<void, Forbidden | NotFound, CurrentActor>
  logs(id: number, limit: number): Effect.Effect<ReadonlyArray<LogEntry>, Forbidden | NotFound, CurrentActor>
  readonly summary: Effect.Effect<ReadonlyArray<{ readonly type: string; readonly count: number }>, Forbidden, CurrentActor>
  providers(published: boolean | undefined): Effect.Effect<ReadonlyArray<Provider>, Forbidden, CurrentActor>
  testWebhook(input: TestWebhookInput): Effect.Effect<TestWebhookResult, Forbidden | Unprocessable, CurrentActor>
}>()("crm/integrations/Integrations") {
  static readonly layerNoDeps = Layer.effect(
    Integrations,
    Effect.gen(function*() {
      const repo = yield* IntegrationsRepo
      const sql = yield* SqlClient.SqlClient
      const config = yield* AppConfig
      const credentials = yield* Credentials
      const outbound = yield* OutboundHttp
      const now = Effect.map(DateTime.now, DateTime.toDateUtc)

      /** Settings rules that need the company (its channels), after the shape was decoded. */
      const checkSettings = Effect.fnUntraced(function*(companyId: CompanyId, settings: WebhookSettings, errors: Errors) {
        validateUrl(settings.url, config.webhookAllowHttp, "settings.url", errors)
        if (settings.selectedEventKeys.length === 0) add(errors, "settings.selectedEventKeys", "Select at least one event.")
        const unknown = settings.selectedEventKeys.filter((key) => !catalogKeys.has(key))
        if (unknown.length > 0) add(errors, "settings.selectedEventKeys", `Unknown event keys: ${unknown.join(", ")}.`)
        if (settings.channelFilter === "selected") {
          if (settings.channelIds.length === 0) add(errors, "settings.channelIds", "Select at least one channel.")
          const own = new Set(yield* repo.ownChannels(companyId, settings.channelIds))
          const foreign = settings.channelIds.filter((id) => !own.has(id))
          if (foreign.length > 0) add(errors, "settings.channelIds", `Unknown channels: ${foreign.join(", ")}.`)
        }
      })

      const decryptSecrets = (companyId: number, bytes: Uint8Array): Secrets =>
        Option.getOrElse(credentials.decrypt(companyId, bytes), () => ({})) as Secrets

      const list = Effect.fn("Integrations.list")(function*(filter: { readonly type?: string; readonly status?: string }) {
        const company = yield* requirePermission("integration.view")
        return (yield* repo.list(company.id, filter)).map(toIntegration)
      })

      const get = Effect.fn("Integrations.get")(function*(id: number) {
        const company = yield* requirePermission("integration.view")
        const row = yield* repo.find(company.id, id)
        if (Option.isNone(row)) return yield* integrationNotFound()
        return toIntegration(row.value)
      })

      const create = Effect.fn("Integrations.create")(function*(input: CreateIntegration) {
        const company = yield* requirePermission("integration.create")
        const errors: Errors = {}
        const settings = mergeSettings(input.settings, null)
        yield* checkSettings(company.id, settings, errors)
        const secrets = mergeSecrets({}, input.secrets, errors)
        checkAuth(settings, secrets, errors)
        if (Object.keys(errors).length > 0) return yield* invalidFields(errors)
        const row = yield* repo.insert(company.id, {
          name: input.name.trim(),
          status: input.status ?? "active",
          settings,
          secrets: credentials.encrypt(company.id, secrets),
          secretNames: names(secrets),
          now: yield* now
        })
        return withMadeSecret(toIntegration(row), {}, secrets, input.secrets)
      })

      const update = Effect.fn("Integrations.update")(function*(id: number, input: UpdateIntegration) {
        const company = yield* requirePermission("integration.update")
        return yield* Effect.gen(function*() {
          const found = yield* repo.findForUpdate(company.id, id)
          if (Option.isNone(found)) return yield* integrationNotFound()
          const current = found.value
          const errors: Errors = {}
          const settings = mergeSettings(input.settings ?? {}, current.settings)
          yield* checkSettings(company.id, settings, errors)
          const stored = decryptSecrets(company.id, current.secrets)
          const secrets = input.secrets === undefined ? stored : mergeSecrets(stored, input.secrets, errors)
          checkAuth(settings, secrets, errors)
          if (Object.keys(errors).length > 0) return yield* invalidFields(errors)
          const status = input.status ?? current.status
          const row = yield* repo.update(company.id, id, {
            name: input.name?.trim() ?? current.name,
            status,
            settings,
            ...(input.secrets === undefined ? {} : { secrets: { bytes: credentials.encrypt(company.id, secrets), names: names(secrets) } }),
            now: yield* now
          }, current.status !== "active" && status === "active")
          return withMadeSecret(toIntegration(row), stored, secrets, input.secrets)
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
      })

      const remove = Effect.fn("Integrations.delete")(function*(id: number) {
        const company = yield* requirePermission("integration.delete")
        if (!(yield* repo.delete(company.id, id))) return yield* integrationNotFound()
      })

      const logs = Effect.fn("Integrations.logs")(function*(id: number, limit: number) {
        const company = yield* requirePermission("integration.view")
        if (Option.isNone(yield* repo.find(company.id, id))) return yield* integrationNotFound()
        return yield* repo.logs(company.id, id, limit)
      })

      const summary = Effect.gen(function*() {
        const company = yield* requirePermission("integration.view")
        const counts = new Map((yield* repo.summary(company.id)).map((row) => [row.type, row.count]))
        return providers.map((p) => ({ type: p.key, count: counts.get(p.key) ?? 0 }))
      }).pipe(Effect.withSpan("Integrations.summary"))

      const listProviders = Effect.fn("Integrations.providers")(function*(published: boolean | undefined) {
        yield* requirePermission("integration.view")
        return providers.filter((p) => published === undefined || p.is_published === published)
      })

      const testWebhook = Effect.fn("Integrations.testWebhook")(function*(input: TestWebhookInput) {
        const company = yield* requirePermission("integration.create")
        const errors: Errors = {}
        validateUrl(input.url, config.webhookAllowHttp, "url", errors)
        const settings = mergeSettings({ ...input.settings, url: input.url }, null)
        const secrets = mergeSecrets({}, input.secrets, errors)
        checkAuth(settings, secrets, errors)
        const type = input.event_key ?? "webhook.test"
        if (type !== "webhook.test" && !catalogKeys.has(type)) add(errors, "event_key", "The event key is not in the event catalog.")
        if (Object.keys(errors).length > 0) return yield* invalidFields(errors)
        const at = yield* now
        const id = `evt_test_${randomBytes(12).toString("hex")}`
        // A test is no event of the company: it has no number in its sequence (`seq` 0).
        const body = envelope({
          id,
          seq: 0,
          event: type,
          companyId: company.id,
          occurredAt: at.toISOString(),
          dataJson: JSON.stringify({ test: true, message: "This is a test delivery." })
        })
        const timestamp = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        const started = yield* Clock.currentTimeMillis
        const sent = yield* Effect.result(outbound.request({
          url: input.url,
          headers: deliveryHeaders(settings, secrets, id, timestamp, body),
          body,
          timeoutMs: settings.timeoutSeconds * 1000,
          allowPrivate: config.webhookAllowPrivate
        }))
        const duration = (yield* Clock.currentTimeMillis) - started
        if (Result.isFailure(sent)) return { ok: false, status_code: null, duration_ms: duration, error: sent.failure.message }
        const ok = sent.success.status >= 200 && sent.success.status < 300
        return ok
          ? { ok, status_code: sent.success.status, duration_ms: duration }
          : { ok, status_code: sent.success.status, duration_ms: duration, error: `The receiver answered HTTP ${sent.success.status}.` }
      })

      return Integrations.of({ list, get, create, update, delete: remove, logs, summary, providers: listProviders, testWebhook })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([IntegrationsRepo.layer, OutboundHttp.layer]))
}

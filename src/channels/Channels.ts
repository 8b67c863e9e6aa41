import { Context, Effect, Layer, Option } from "effect"
import { CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { AppConfig } from "../platform/Config.ts"
import { randomToken } from "../platform/Crypto.ts"
import {
  BadGateway,
  type Forbidden,
  invalidFields,
  type NotFound,
  notFound,
  ruleViolation,
  type Unprocessable
} from "../platform/Errors.ts"
import { ChannelAccess } from "../auth/ChannelAccess.ts"
import { Credentials } from "../providers/Credentials.ts"
import {
  type Channel,
  type ChannelCredentials,
  type CreateChannel,
  providerTypes,
  optionalCredentials,
  requiredCredentials,
  type UpdateChannel
} from "./Domain.ts"
import type { ChannelContext } from "../providers/Provider.ts"
import type { ProviderKind } from "../providers/Domain.ts"
import { ProvidersLayer } from "../providers/Providers.ts"
import { type ChannelRow, ChannelsRepo } from "./Repo.ts"
import { botTokenPattern, TelegramApi } from "../providers/Telegram.ts"
import { phoneNumberIdPattern, type ProviderLimits } from "../providers/WhatsAppCloud.ts"

export const channelNotFound = () => notFound("Channel not found.")

const hookPath: Partial<Record<ProviderKind, string>> = { telegram: "telegram", whatsapp_cloud: "whatsapp" }

const formats: Partial<Record<keyof ChannelCredentials, readonly [RegExp, string]>> = {
  bot_token: [botTokenPattern, "The credentials.bot_token field must be a Telegram bot token (<digits>:<secret>)."],
  phone_number_id: [phoneNumberIdPattern, "The credentials.phone_number_id field must contain only digits."],
  business_account_id: [phoneNumberIdPattern, "The credentials.business_account_id field must contain only digits."]
}

const invalid = invalidFields

/** Only the keys the provider uses, each checked; missing required keys are reported by the caller. */
const credentialErrors = (provider: ProviderKind, credentials: Record<string, string>) => {
  const errors: Record<string, Array<string>> = {}
  for (const key of [...requiredCredentials[provider], ...(optionalCredentials[provider] ?? [])]) {
    const value = credentials[key]
    if (value === undefined) {
      if (!requiredCredentials[provider].includes(key)) continue
      errors[`credentials.${key}`] = [`The credentials.${key} field is required.`]
      continue
    }
    const format = formats[key]
    if (format !== undefined && !format[0].test(value)) errors[`credentials.${key}`] = [format[1]]
  }
  return errors
}

const onlyUsed = (provider: ProviderKind, input: ChannelCredentials | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const key of [...requiredCredentials[provider], ...(optionalCredentials[provider] ?? [])]) {
    const value = input?.[key]
    if (value !== undefined) out[key] = value.trim()
  }
  return out
}

type Denied = Forbidden | NotFound

/** Channels of the caller's company, and the decrypted view of a channel that other areas hand to the provider. */
export class Channels extends Context.Service<Channels, {
  readonly list: Effect.Effect<ReadonlyArray<Channel>, Forbidden, CurrentActor>
  get(id: number): Effect.Effect<Channel, Denied, CurrentActor>
  create(input: CreateChannel): Effect.Effect<Channel, Forbidden | Unprocessable, CurrentActor>
  update(id: number, input: UpdateChannel): Effect.Effect<Channel, Denied | Unprocessable, CurrentActor>
  remove(id: number): Effect.Effect<void, Denied, CurrentActor>
  registerWebhook(id: number): Effect.Effect<Channel, Denied | Unprocessable | BadGateway, CurrentActor>
  /** A channel the actor sees, with `permission`, as the provider sees it (404 when hidden or missing). */
  visibleContext(id: number, permission: string): Effect.Effect<ChannelContext, Denied, CurrentActor>
  /** A live (not deleted) channel of the company with its credentials decrypted. */
  context(companyId: number, id: number): Effect.Effect<Option.Option<ChannelContext>>
  /** The channel a provider webhook names, with the secret its requests must prove. */
  forHook(id: number, provider: ProviderKind): Effect.Effect<Option.Option<{ readonly channel: ChannelContext; readonly webhookSecret: string }>>
  /** Stores the limits the provider announced for the channel (`provider_throughput`, `messaging_limit` settings). */
  recordProviderLimits(channel: ChannelContext, limits: ProviderLimits): Effect.Effect<void>
}>()("crm/channels/Channels") {
  static readonly layerNoDeps = Layer.effect(
    Channels,
    Effect.gen(function*() {
      const repo = yield* ChannelsRepo
      const credentials = yield* Credentials
      const access = yield* ChannelAccess
      const telegram = yield* TelegramApi
      const config = yield* AppConfig
      const appUrl = config.appUrl.replace(/\/+$/, "")

      const webhookUrl = (row: ChannelRow) => {
        const path = hookPath[row.provider]
        return path === undefined ? null : `${appUrl}/hooks/${path}/${row.id}`
      }

      const view = (row: ChannelRow): Channel => ({
        id: row.id,
        company_id: row.company_id,
        type: row.type,
        provider: row.provider,
        name: row.name,
        account_name: row.account_name,
        status: row.status,
        settings: {
          ...(typeof row.settings.sandbox_fail === "boolean" ? { sandbox_fail: row.settings.sandbox_fail } : {}),
          ...(row.settings.template_review === "auto" || row.settings.template_review === "manual"
            ? { template_review: row.settings.template_review }
            : {})
        },
        webhook_url: webhookUrl(row),
        created_at: row.created_at.toISOString(),
        updated_at: row.updated_at.toISOString()
      })

      const secretsOf = (row: ChannelRow): Record<string, string> =>
        row.credentials === null ? {} : Option.getOrElse(credentials.decrypt(row.company_id, row.credentials), () => ({}))

      const toContext = (row: ChannelRow): ChannelContext => ({
        id: row.id,
        companyId: row.company_id,
        type: row.type,
        provider: row.provider,
        status: row.status,
        credentials: secretsOf(row),
        settings: row.settings
      })

      /** The row if it exists in the company and the actor may see it; 404 otherwise, never 403. */
      const visibleRow = Effect.fnUntraced(function*(id: number, permission: string) {
        const company = yield* requirePermission(permission)
        const actor = yield* CurrentActor
        const row = yield* repo.find(company.id, id)
        if (Option.isNone(row) || !(yield* access.canSee(company.id, actor, id))) return yield* channelNotFound()
        return row.value
      })

      const list = Effect.gen(function*() {
        const company = yield* requirePermission("channel.view")
        const actor = yield* CurrentActor
        const visible = yield* access.visible(company.id, actor)
        return (yield* repo.list(company.id, visible)).map(view)
      }).pipe(Effect.withSpan("Channels.list"))

      const get = Effect.fn("Channels.get")(function*(id: number) {
        return view(yield* visibleRow(id, "channel.view"))
      })

      const create = Effect.fn("Channels.create")(function*(input: CreateChannel) {
        const company = yield* requirePermission("channel.create")
        const errors: Record<string, Array<string>> = {}
        const allowedTypes = providerTypes[input.provider]
        if (allowedTypes !== null && !allowedTypes.includes(input.type)) {
          errors.provider = [`The ${input.provider} provider serves only ${allowedTypes.join(", ")} channels.`]
        }
        const secrets = onlyUsed(input.provider, input.credentials)
        Object.assign(errors, credentialErrors(input.provider, secrets))
        if (Object.keys(errors).length > 0) return yield* invalid(errors)
        const row = yield* repo.insert(company.id, {
          type: input.type,
          provider: input.provider,
          name: input.name.trim(),
          account_name: input.account_name ?? null,
          credentials: Object.keys(secrets).length === 0 ? null : credentials.encrypt(company.id, secrets),
          webhook_secret: randomToken(48),
          settings: { ...input.settings }
        })
        return view(row)
      })

      const update = Effect.fn("Channels.update")(function*(id: number, input: UpdateChannel) {
        const row = yield* visibleRow(id, "channel.update")
        let encrypted: Uint8Array | undefined
        const incoming = onlyUsed(row.provider, input.credentials)
        if (Object.keys(incoming).length > 0) {
          const merged = { ...secretsOf(row), ...incoming }
          const errors = credentialErrors(row.provider, merged)
          if (Object.keys(errors).length > 0) return yield* invalid(errors)
          encrypted = credentials.encrypt(row.company_id, merged)
        }
        const updated = yield* repo.update(row.company_id, id, {
          name: input.name?.trim(),
          account_name: input.account_name,
          status: input.status,
          credentials: encrypted,
          settings: input.settings
        })
        if (Option.isNone(updated)) return yield* channelNotFound()
        return view(updated.value)
      })

      const remove = Effect.fn("Channels.remove")(function*(id: number) {
        const row = yield* visibleRow(id, "channel.delete")
        if (!(yield* repo.softDelete(row.company_id, id))) return yield* channelNotFound()
      })

      const registerWebhook = Effect.fn("Channels.registerWebhook")(function*(id: number) {
        const row = yield* visibleRow(id, "channel.update")
        const url = webhookUrl(row)
        if (row.provider !== "telegram" || url === null) {
          return yield* ruleViolation(
            "webhook_not_applicable",
            "Only Telegram channels register their webhook through the API; a WhatsApp Cloud webhook is set in the Meta app with the channel's verify token."
          )
        }
        const bot = yield* telegram.registerWebhook(toContext(row), url, row.webhook_secret).pipe(
          Effect.catchTag("ProviderError", (e) =>
            e.code === "unavailable"
              ? Effect.fail(new BadGateway({ message: `Telegram is unavailable: ${e.message}` }))
              : Effect.fail(ruleViolation("provider_rejected", `Telegram refused the webhook: ${e.message}`)))
        )
        const updated = yield* repo.update(row.company_id, id, {
          status: "connected",
          account_name: row.account_name ?? (bot.username === null ? undefined : `@${bot.username}`)
        })
        if (Option.isNone(updated)) return yield* channelNotFound()
        return view(updated.value)
      })

      const visibleContext = Effect.fn("Channels.visibleContext")(function*(id: number, permission: string) {
        return toContext(yield* visibleRow(id, permission))
      })

      const context = (companyId: number, id: number) => Effect.map(repo.find(CompanyId.make(companyId), id), Option.map(toContext))

      const forHook = (id: number, provider: ProviderKind) =>
        Effect.map(repo.findForHook(id, provider), Option.map((row) => ({ channel: toContext(row), webhookSecret: row.webhook_secret })))

      const recordProviderLimits = (channel: ChannelContext, limits: ProviderLimits) =>
        repo.update(CompanyId.make(channel.companyId), channel.id, { settings: { ...limits } }).pipe(Effect.asVoid)

      return Channels.of({ list, get, create, update, remove, registerWebhook, visibleContext, context, forHook, recordProviderLimits })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(ChannelsRepo.layer))
}

/**
 * Everything the channels area puts in the app: `Channels`, `Credentials`, `Providers`
 * (with `SandboxLog` and `TelegramApi`). Needs `ChannelAccess`, `AppConfig` and `SqlClient`.
 */
export const ChannelsLayer = Channels.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(Credentials.layer, ProvidersLayer))
)

import { Context, DateTime, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { randomToken } from "../platform/Crypto.ts"
import { type ChannelContext, type ModerationStatus, ProviderError, type ProviderAdapter, type TemplatePage } from "./Provider.ts"
import { channelRules } from "./Domain.ts"

export interface SandboxCall {
  readonly channelId: number
  readonly operation:
    | "send"
    | "edit"
    | "revoke"
    | "react"
    | "like"
    | "block"
    | "unblock"
    | "download"
    | "call_permission_request"
    | "submit_template"
    | "template_page"
    | "delete_template"
  readonly args: Record<string, unknown>
  /** `ok`, or the `ProviderError` code the call failed with. */
  readonly outcome: string
  readonly at: Date
}

const perChannel = 500
const channelsKept = 10_000

/** Every call the sandbox provider received, per channel, newest last (bounded: it is a test aid, not a store). */
export class SandboxLog extends Context.Service<SandboxLog, {
  record(call: SandboxCall): void
  calls(channelId: number): ReadonlyArray<SandboxCall>
  clear(channelId: number): void
}>()("crm/channels/SandboxLog") {
  static readonly layer = Layer.sync(SandboxLog, () => {
    const log = new Map<number, Array<SandboxCall>>()
    return SandboxLog.of({
      record: (call) => {
        let calls = log.get(call.channelId)
        if (calls === undefined) {
          if (log.size >= channelsKept) log.delete(log.keys().next().value!)
          calls = []
          log.set(call.channelId, calls)
        }
        calls.push(call)
        if (calls.length > perChannel) calls.splice(0, calls.length - perChannel)
      },
      calls: (channelId) => [...(log.get(channelId) ?? [])],
      clear: (channelId) => {
        log.delete(channelId)
      }
    })
  })
}

const offline = () => new ProviderError({ code: "channel_offline", message: "The channel is offline." })
const unsupported = (what: string) =>
  new ProviderError({ code: "not_supported", message: `This channel type does not support ${what}.` })
const windowClosed = () =>
  new ProviderError({
    code: "not_reachable_24h",
    message: "The recipient has not written within the customer service window; a template is required."
  })

/** Only business-messenger channels moderate templates. */
const templatesOnly = <A>(channel: ChannelContext, answer: () => A): Effect.Effect<A, ProviderError> =>
  channel.type === "msgr_a_business" ? Effect.sync(answer) : Effect.fail(unsupported("message templates"))

const dataUrl = /^data:([^;,]+)?(;base64)?,(.*)$/s

/**
 * A simulated messenger for any channel type, honouring `channelRules`: revoke, edit,
 * likes, provider blocks and call-permission requests only where the type has them, and on
 * types with a customer window (msgr_a_business) free-form sends, blocks and call-permission
 * requests only to recipients who wrote within it. `settings.sandbox_fail` or status
 * `disconnected` makes every call fail.
 */
export const makeSandbox = Effect.gen(function*() {
  const log = yield* SandboxLog
  const sql = yield* SqlClient.SqlClient

  const lastInbound = (channel: ChannelContext, recipient: string) =>
    sql<{ readonly at: Date | null }>`
      SELECT GREATEST(max(t.last_inbound_at), max(m.last_at)) AS at
      FROM threads t
      LEFT JOIN contact_accounts ca ON ca.id = t.contact_account_id AND ca.company_id = ${channel.companyId}
      LEFT JOIN LATERAL (
        SELECT max(m."timestamp") AS last_at FROM messages m
        WHERE m.company_id = ${channel.companyId} AND m.thread_id = t.id AND m.direction = 'inbound'
      ) m ON true
      WHERE t.company_id = ${channel.companyId} AND t.channel_id = ${channel.id}
        AND (t.external_thread_id = ${recipient} OR ca.external_id = ${recipient})`.pipe(
      Effect.map((rows) => rows[0]?.at ?? null),
      Effect.orDie
    )

  const requireWindow = Effect.fnUntraced(function*(channel: ChannelContext, recipient: string) {
    const hours = channelRules[channel.type].customerWindowHours
    if (hours === null) return
    const at = yield* lastInbound(channel, recipient)
    const now = yield* DateTime.now
    if (at === null || DateTime.toEpochMillis(now) - at.getTime() > hours * 3600_000) return yield* windowClosed()
  })

  /**
   * The simulated account's templates are the instances submitted on the channel, read where the rest of
   * the sandbox's state lives. Its reviewer passes pending ones unless the channel asks for manual review
   * (then `POST /v1/channels/{id}/sandbox/template-status` decides, and the account shows what we hold).
   */
  const accountTemplates = (channel: ChannelContext, limit: number, after: string | null) =>
    sql<{ readonly external_id: string; readonly slug: string; readonly language: string; readonly meta_status: string; readonly meta_status_reason: string | null }>`
      SELECT t.external_id, g.slug, t.language, t.meta_status, t.meta_status_reason
      FROM templates t JOIN template_groups g ON g.company_id = t.company_id AND g.id = t.group_id
      WHERE t.company_id = ${channel.companyId} AND t.channel_id = ${channel.id} AND t.external_id IS NOT NULL
        ${after === null ? sql`` : sql`AND t.external_id > ${after}`}
      ORDER BY t.external_id
      LIMIT ${limit + 1}`.pipe(
      Effect.map((rows): TemplatePage => {
        const manual = channel.settings.template_review === "manual"
        const templates = rows.slice(0, limit).map((r) => {
          const held = r.meta_status === "local" ? "pending" : r.meta_status as ModerationStatus
          return {
            externalId: r.external_id,
            name: r.slug,
            language: r.language,
            status: held === "pending" && !manual ? "approved" as const : held,
            reason: held === "pending" ? null : r.meta_status_reason
          }
        })
        return { templates, after: rows.length > limit ? templates[templates.length - 1].externalId : null }
      }),
      Effect.orDie
    )

  const call = <A>(
    channel: ChannelContext,
    operation: SandboxCall["operation"],
    args: Record<string, unknown>,
    body: Effect.Effect<A, ProviderError>
  ): Effect.Effect<A, ProviderError> =>
    Effect.suspend(() => {
      const failing = channel.status === "disconnected" || channel.settings.sandbox_fail === true
      const record = (outcome: string) =>
        Effect.map(DateTime.now, (now) =>
          log.record({ channelId: channel.id, operation, args, outcome, at: new Date(DateTime.toEpochMillis(now)) }))
      return (failing ? Effect.fail(offline()) : body).pipe(
        Effect.tap(() => record("ok")),
        Effect.tapError((error) => record(error.code))
      )
    })

  const adapter: ProviderAdapter = {
    send: (channel, message) =>
      call(
        channel,
        "send",
        {
          recipient: message.recipient,
          text: message.text,
          attachments: message.attachments.length,
          template: message.template ?? null
        },
        Effect.gen(function*() {
          if (message.template === undefined) yield* requireWindow(channel, message.recipient)
          return { externalMessageId: `sbx_${randomToken(24)}`, externalThreadId: null, status: "sent" as const }
        })
      ),
    edit: (channel, recipient, externalMessageId, text) =>
      call(
        channel,
        "edit",
        { recipient, externalMessageId, text },
        channelRules[channel.type].editWindowSeconds === null ? Effect.fail(unsupported("editing")) : Effect.void
      ),
    revoke: (channel, recipient, externalMessageId) =>
      call(
        channel,
        "revoke",
        { recipient, externalMessageId },
        channelRules[channel.type].revoke ? Effect.void : Effect.fail(unsupported("deleting for the recipient"))
      ),
    react: (channel, recipient, externalMessageId, reaction) =>
      call(channel, "react", { recipient, externalMessageId, reaction }, Effect.void),
    like: (channel, externalThreadId, externalMessageId) =>
      call(
        channel,
        "like",
        { externalThreadId, externalMessageId },
        channelRules[channel.type].likes ? Effect.void : Effect.fail(unsupported("likes"))
      ),
    block: (channel, externalUserId) =>
      call(
        channel,
        "block",
        { externalUserId },
        channelRules[channel.type].providerBlock ? requireWindow(channel, externalUserId) : Effect.fail(unsupported("blocking"))
      ),
    unblock: (channel, externalUserId) =>
      call(
        channel,
        "unblock",
        { externalUserId },
        channelRules[channel.type].providerBlock ? Effect.void : Effect.fail(unsupported("blocking"))
      ),
    // Sandbox media references are data URLs, so a simulated inbound attachment can be fetched like a real one.
    download: (channel, providerMediaRef) =>
      call(
        channel,
        "download",
        { providerMediaRef },
        Effect.gen(function*() {
          const match = dataUrl.exec(providerMediaRef)
          if (match === null) return yield* new ProviderError({ code: "not_found", message: "Unknown media reference." })
          const bytes = match[2] !== undefined
            ? Buffer.from(match[3], "base64")
            : Buffer.from(decodeURIComponent(match[3]), "utf8")
          return { bytes: new Uint8Array(bytes), mimeType: match[1] ?? null }
        })
      ),
    requestCallPermission: (channel, recipient, body) =>
      call(
        channel,
        "call_permission_request",
        { recipient, body },
        channelRules[channel.type].callPermission
          ? Effect.map(requireWindow(channel, recipient), () => ({ externalMessageId: `sbx_${randomToken(24)}` }))
          : Effect.fail(unsupported("call-permission requests"))
      ),
    submitTemplate: (channel, template, externalId) =>
      call(
        channel,
        "submit_template",
        { name: template.name, language: template.language, externalId },
        templatesOnly(channel, () => ({ externalId: externalId ?? `sbx_tpl_${randomToken(16)}`, status: "pending" as const, reason: null }))
      ),
    templatePage: (channel, page) =>
      call(channel, "template_page", { limit: page.limit, after: page.after }, templatesOnly(channel, () => undefined).pipe(
        Effect.andThen(accountTemplates(channel, page.limit, page.after))
      )),
    deleteTemplate: (channel, ref) =>
      call(channel, "delete_template", { externalId: ref.externalId, name: ref.name }, templatesOnly(channel, () => undefined))
  }
  return adapter
})

import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { type LoggedRule, RateLimiter } from "../platform/RateLimiter.ts"
import { type CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Credentials } from "../providers/Credentials.ts"
import { Providers } from "../providers/Provider.ts"
import { channelRules } from "../providers/Domain.ts"
import { Events } from "../events/Events.ts"
import { channelContext, windowClosed } from "../providers/Rules.ts"
import type { Forbidden, NotFound, TooManyRequests } from "../platform/Errors.ts"
import { contactNotFound } from "./Contacts.ts"
import type { BlockContact, BlockPreviewChannel, BlockResult, ProviderFailure } from "./Domain.ts"
import { type BlockTarget, ContactsRepo } from "./Repo.ts"

/** Spec limits: 6 block changes an hour per contact; 60 an hour and 300 a day per company. */
export const blockRules: ReadonlyArray<LoggedRule> = [
  { scope: "subject", limit: 6, windowMs: 3_600_000 },
  { scope: "company", limit: 60, windowMs: 3_600_000 },
  { scope: "company", limit: 300, windowMs: 86_400_000 }
]
export const blockLog = "contact_block"

const byChannel = (targets: ReadonlyArray<BlockTarget>) => {
  const channels = new Map<number, { readonly channel: BlockTarget; readonly recipients: Set<string>; lastInbound: Date | null; blind: boolean }>()
  for (const target of targets) {
    let entry = channels.get(target.channel_id)
    if (entry === undefined) {
      entry = { channel: target, recipients: new Set(), lastInbound: null, blind: false }
      channels.set(target.channel_id, entry)
    }
    if (target.recipient === null) entry.blind = true
    else entry.recipients.add(target.recipient)
    if (target.last_inbound_at !== null && (entry.lastInbound === null || target.last_inbound_at > entry.lastInbound)) {
      entry.lastInbound = target.last_inbound_at
    }
  }
  return [...channels.values()]
}

/**
 * The contact block state table: the local block (or unblock) is committed first, with its event;
 * then every msgr_a / msgr_a_business channel that has a thread with the contact gets the same
 * change at the provider, best effort. A repeated block or unblock is a no-op without provider calls.
 */
export class ContactBlocking extends Context.Service<ContactBlocking, {
  preview(id: number): Effect.Effect<{ readonly contact_id: number; readonly blocked: boolean; readonly channels: ReadonlyArray<BlockPreviewChannel> }, Forbidden | NotFound, CurrentActor>
  block(id: number, input: BlockContact): Effect.Effect<BlockResult, Forbidden | NotFound | TooManyRequests, CurrentActor>
  unblock(id: number): Effect.Effect<BlockResult, Forbidden | NotFound | TooManyRequests, CurrentActor>
}>()("crm/contacts/ContactBlocking") {
  static readonly layerNoDeps = Layer.effect(
    ContactBlocking,
    Effect.gen(function*() {
      const repo = yield* ContactsRepo
      const events = yield* Events
      const sql = yield* SqlClient.SqlClient
      const credentials = yield* Credentials
      const providers = yield* Providers
      const limiter = yield* RateLimiter

      const throttle = (companyId: CompanyId, contactId: number) =>
        limiter.enforceLogged(companyId, blockLog, String(contactId), blockRules)

      /** One call per distinct recipient of the channel; the channel's first failure is its outcome. */
      const propagate = (companyId: CompanyId, targets: ReadonlyArray<BlockTarget>, operation: "block" | "unblock") =>
        Effect.forEach(byChannel(targets), (entry) =>
          Effect.gen(function*() {
            const context = channelContext(credentials, companyId, {
              id: entry.channel.channel_id,
              type: entry.channel.channel_type,
              provider: entry.channel.provider,
              status: entry.channel.status,
              credentials: entry.channel.credentials,
              settings: entry.channel.settings
            })
            const adapter = providers.forChannel(context)
            let failure: ProviderFailure | null = null
            for (const recipient of entry.recipients) {
              const outcome = yield* Effect.result(adapter[operation](context, recipient))
              if (outcome._tag === "Failure" && failure === null) {
                failure = { channel_id: context.id, error_code: outcome.failure.code, message: outcome.failure.message }
              }
            }
            if (failure === null && entry.recipients.size === 0 && entry.blind) {
              failure = { channel_id: context.id, error_code: "no_recipient", message: "The contact's thread on this channel has no provider user id." }
            }
            return failure
          }), { concurrency: 4 }).pipe(Effect.map((outcomes) => outcomes.filter((f): f is ProviderFailure => f !== null)))

      const preview = Effect.fn("ContactBlocking.preview")(function*(id: number) {
        const company = yield* requirePermission("contact.update")
        const contact = yield* repo.exists(company.id, id)
        if (Option.isNone(contact)) return yield* contactNotFound()
        const now = yield* Clock.currentTimeMillis
        const channels = byChannel(yield* repo.blockTargets(company.id, id)).map(({ channel, lastInbound }): BlockPreviewChannel => ({
          channel_id: channel.channel_id,
          channel_name: channel.channel_name,
          channel_type: channel.channel_type,
          provider_block_supported: channelRules[channel.channel_type].providerBlock,
          window_open: windowClosed(channel.channel_type, false, lastInbound, now) === null
        }))
        return { contact_id: id, blocked: contact.value.blocked_at !== null, channels }
      })

      const change = Effect.fnUntraced(function*(id: number, block: { readonly reason: string | null } | null) {
        const company = yield* requirePermission("contact.update")
        const actor = yield* CurrentActor
        const current = yield* repo.exists(company.id, id)
        if (Option.isNone(current)) return yield* contactNotFound()
        const noop = (row: { readonly blocked_at: Date | null; readonly blocked_reason: string | null }): BlockResult => ({
          message: block !== null ? "Contact was already blocked." : "Contact was not blocked.",
          contact_id: id,
          blocked_at: row.blocked_at?.toISOString() ?? null,
          blocked_reason: row.blocked_reason,
          provider_failures: []
        })
        if ((current.value.blocked_at !== null) === (block !== null)) return noop(current.value)
        yield* throttle(company.id, id)
        const changed = yield* Effect.gen(function*() {
          const row = yield* repo.setBlocked(company.id, id, block === null ? null : { reason: block.reason, userId: actor.userId })
          if (Option.isNone(row)) return Option.none()
          yield* events.emit(
            company.id,
            block !== null ? "contact.blocked" : "contact.unblocked",
            block !== null
              ? {
                contact_id: id,
                blocked_at: row.value.blocked_at?.toISOString() ?? null,
                blocked_reason: row.value.blocked_reason,
                blocked_by_user_id: row.value.blocked_by_user_id
              }
              : { contact_id: id, unblocked_by_user_id: actor.userId }
          )
          return row
        }).pipe(sql.withTransaction, Effect.orDie)
        if (Option.isNone(changed)) {
          // Someone else changed or deleted the contact in between: answer with what is there now.
          const now = yield* repo.exists(company.id, id)
          if (Option.isNone(now)) return yield* contactNotFound()
          return noop(now.value)
        }
        const failures = yield* propagate(company.id, yield* repo.blockTargets(company.id, id), block !== null ? "block" : "unblock")
        return {
          message: block !== null ? "Contact blocked." : "Contact unblocked.",
          contact_id: id,
          blocked_at: changed.value.blocked_at?.toISOString() ?? null,
          blocked_reason: changed.value.blocked_reason,
          provider_failures: failures
        }
      })

      const blockContact = Effect.fn("ContactBlocking.block")(function*(id: number, input: BlockContact) {
        const reason = input.reason?.trim() ?? ""
        return yield* change(id, { reason: reason === "" ? null : reason })
      })

      const unblock = Effect.fn("ContactBlocking.unblock")(function*(id: number) {
        return yield* change(id, null)
      })

      return ContactBlocking.of({ preview, block: blockContact, unblock })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(ContactsRepo.layer))
}

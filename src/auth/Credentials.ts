import { Clock, Context, Effect, Layer, Option, PubSub, type Scope } from "effect"
import { Notices } from "../platform/Notices.ts"

/** What a change makes stale: one token or session, every credential of a user, or of everyone in a company (plan). */
export type CredentialScope =
  | { readonly tokenId: number }
  | { readonly sessionId: string }
  | { readonly userId: number }
  | { readonly companyId: number }

/** Realtime subscriptions granted to `userId` on these companies' channels (and its own) end on every runner. */
export interface SubscriptionRevocation {
  readonly userId: number
  readonly companyIds: ReadonlyArray<number>
}

interface Entry<A> {
  readonly value: A
  readonly at: number
  readonly userId: number
  readonly companyId: number | null
}

interface Frame {
  readonly s: ReadonlyArray<CredentialScope>
  readonly r?: SubscriptionRevocation
}

const topic = "credentials"
/** How long a runner trusts a credential it resolved, should a notice of its change be lost. */
export const credentialTtlMs = 5_000
const maxEntries = 50_000

const inScope = (key: string, entry: Entry<unknown>, scope: CredentialScope): boolean =>
  "tokenId" in scope
    ? key === `t:${scope.tokenId}`
    : "sessionId" in scope
    ? key === `s:${scope.sessionId}`
    : "userId" in scope
    ? entry.userId === scope.userId
    : entry.companyId === scope.companyId

/**
 * Resolved credentials kept per runner for at most `credentialTtlMs`, keyed by token id or
 * session id. Whatever changes what a credential resolves to (revocation, password, membership,
 * role, current company, plan) calls `forget` after its write: this runner drops the entries at
 * once, the others on the NOTIFY, and a runner whose LISTEN connection comes back flushes all.
 */
export class CredentialCache extends Context.Service<CredentialCache, {
  /** The cached resolution of `key` (`t:<token id>` / `s:<session id>`), else `load`'s (cached when found). */
  resolve<A extends { readonly user_id: number; readonly company_id: number | null }>(
    key: string,
    load: Effect.Effect<Option.Option<A>>
  ): Effect.Effect<Option.Option<A>>
  /** Drops the credentials in `scopes` here and on every runner (after commit, inside a transaction). */
  forget(scopes: ReadonlyArray<CredentialScope>, revoke?: SubscriptionRevocation): Effect.Effect<void>
  /** Subscriptions to end, from this runner's changes and the others'. */
  readonly revocations: Effect.Effect<PubSub.Subscription<SubscriptionRevocation>, never, Scope.Scope>
}>()("crm/auth/CredentialCache") {
  static readonly layer = Layer.effect(
    CredentialCache,
    Effect.gen(function*() {
      const notices = yield* Notices
      const entries = new Map<string, Entry<unknown>>()
      const revoked = yield* PubSub.unbounded<SubscriptionRevocation>()
      // Bumped by every drop: a lookup that raced a drop (read before the commit, finished after
      // it) does not store what it read.
      let generation = 0

      const drop = (scopes: ReadonlyArray<CredentialScope>) => {
        generation += 1
        for (const [key, entry] of entries) {
          if (scopes.some((scope) => inScope(key, entry, scope))) entries.delete(key)
        }
      }

      const subscription = yield* notices.subscribe
      yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
        const signal = yield* PubSub.take(subscription)
        if (signal._tag === "Listening") {
          generation += 1
          entries.clear()
          return
        }
        if (signal.topic !== topic) return
        const frame = signal.payload as Frame
        drop(frame.s)
        if (frame.r !== undefined) yield* PubSub.publish(revoked, frame.r)
      }).pipe(Effect.catchCause((cause) => Effect.logWarning("credential notice dropped", cause)))))

      const resolve = <A extends { readonly user_id: number; readonly company_id: number | null }>(
        key: string,
        load: Effect.Effect<Option.Option<A>>
      ) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const cached = entries.get(key)
          if (cached !== undefined) {
            if (cached.at + credentialTtlMs > now) return Option.some(cached.value as A)
            entries.delete(key)
          }
          const before = generation
          const found = yield* load
          if (Option.isSome(found) && before === generation) {
            if (entries.size >= maxEntries) entries.clear()
            entries.set(key, { value: found.value, at: now, userId: found.value.user_id, companyId: found.value.company_id })
          }
          return found
        })

      const forget = (scopes: ReadonlyArray<CredentialScope>, revoke?: SubscriptionRevocation) =>
        Effect.gen(function*() {
          // Dropped now as well as after commit: a lookup in between reads the old row, and the
          // generation bump at commit keeps it from being stored.
          drop(scopes)
          const frame: Frame = revoke === undefined ? { s: scopes } : { s: scopes, r: revoke }
          yield* notices.send(topic, frame)
        })

      return CredentialCache.of({ resolve, forget, revocations: PubSub.subscribe(revoked) })
    })
  )
}

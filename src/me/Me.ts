import { Context, Effect, Layer } from "effect"
import { CurrentActor } from "../auth/Domain.ts"
import type { Profile } from "./Domain.ts"
import { MeRepo } from "./Repo.ts"

export class Me extends Context.Service<Me, {
  readonly profile: Effect.Effect<Profile, never, CurrentActor>
}>()("crm/me/Me") {
  static readonly layer = Layer.effect(
    Me,
    Effect.gen(function*() {
      const repo = yield* MeRepo
      const profile = Effect.gen(function*() {
        const actor = yield* CurrentActor
        const user = yield* repo.findUser(actor.userId)
        const { email_verified_at, ...rest } = user
        return {
          ...rest,
          email_verified: email_verified_at !== null,
          // The active company is the one the credential resolved to; a stale current_company_id reads as none.
          current_company_id: actor.company?.id ?? null,
          roles: actor.company === null ? [] : [actor.company.role],
          permissions: actor.company === null ? [] : [...actor.company.permissions]
        }
      })
      return Me.of({ profile })
    })
  ).pipe(Layer.provide(MeRepo.layer))
}

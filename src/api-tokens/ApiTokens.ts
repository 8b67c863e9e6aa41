import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { CurrentActor, requireFeature, requirePermission } from "../auth/Domain.ts"
import { Tokens } from "../auth/Tokens.ts"
import { Events } from "../events/Events.ts"
import { type FeatureNotAvailable, type Forbidden, type NotFound, notFound } from "../platform/Errors.ts"
import type { ApiToken, CreateApiToken, CreatedApiToken, UpdateApiToken } from "./Domain.ts"
import { ApiTokensRepo } from "./Repo.ts"
import { CredentialCache } from "../auth/Credentials.ts"

const tokenNotFound = () => notFound("Token not found.")

type Denied = Forbidden | FeatureNotAvailable

/** Token management of the caller's company: an `api_token.*` permission, and plan feature `api` except to revoke. */
export class ApiTokens extends Context.Service<ApiTokens, {
  readonly list: Effect.Effect<ReadonlyArray<ApiToken>, Denied, CurrentActor>
  get(id: number): Effect.Effect<ApiToken, Denied | NotFound, CurrentActor>
  create(input: CreateApiToken): Effect.Effect<CreatedApiToken, Denied, CurrentActor>
  update(id: number, input: UpdateApiToken): Effect.Effect<ApiToken, Denied | NotFound, CurrentActor>
  revoke(id: number): Effect.Effect<void, Forbidden | NotFound, CurrentActor>
}>()("crm/api-tokens/ApiTokens") {
  static readonly layerNoDeps = Layer.effect(
    ApiTokens,
    Effect.gen(function*() {
      const repo = yield* ApiTokensRepo
      const credentials = yield* CredentialCache
      const tokens = yield* Tokens
      const events = yield* Events
      const sql = yield* SqlClient.SqlClient

      const allowed = Effect.fnUntraced(function*(permission: string) {
        yield* requireFeature("api")
        return yield* requirePermission(permission)
      })

      const list = Effect.gen(function*() {
        const company = yield* allowed("api_token.view")
        return yield* repo.list(company.id)
      }).pipe(Effect.withSpan("ApiTokens.list"))

      const get = Effect.fn("ApiTokens.get")(function*(id: number) {
        const company = yield* allowed("api_token.view")
        const token = yield* repo.find(company.id, id)
        if (Option.isNone(token)) return yield* tokenNotFound()
        return token.value
      })

      const create = Effect.fn("ApiTokens.create")(function*(input: CreateApiToken) {
        const company = yield* allowed("api_token.create")
        return yield* Effect.gen(function*() {
          const issued = yield* tokens.createServiceToken(company.id, {
            name: input.name,
            description: input.description ?? ""
          })
          const token = yield* Effect.flatMap(repo.find(company.id, issued.id), Effect.fromOption)
          yield* events.emit(company.id, "api_token.created", { id: token.id, name: token.name })
          return { ...token, token: issued.plaintext }
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      const update = Effect.fn("ApiTokens.update")(function*(id: number, input: UpdateApiToken) {
        const company = yield* allowed("api_token.update")
        const token = yield* repo.update(company.id, id, input)
        if (Option.isNone(token)) return yield* tokenNotFound()
        // The name is the service account's, which the token resolves to.
        yield* credentials.forget([{ tokenId: id }])
        return token.value
      })

      // Revoking stays possible after a downgrade to a plan without `api`: a leaked
      // credential must never outlive the subscription that created it.
      const revoke = Effect.fn("ApiTokens.revoke")(function*(id: number) {
        const company = yield* requirePermission("api_token.delete")
        yield* Effect.gen(function*() {
          const deleted = yield* repo.deleteServiceAccount(company.id, id)
          if (Option.isNone(deleted)) return yield* tokenNotFound()
          const userId = deleted.value.user_id
          yield* credentials.forget([{ tokenId: id }, { userId }], { userId, companyIds: [company.id] })
          yield* events.emit(company.id, "api_token.deleted", { id: deleted.value.id, name: deleted.value.name })
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
      })

      return ApiTokens.of({ list, get, create, update, revoke })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(ApiTokensRepo.layer))
}

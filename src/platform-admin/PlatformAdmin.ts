import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId } from "../auth/Domain.ts"
import { Passwords } from "../auth/Passwords.ts"
import { Tokens } from "../auth/Tokens.ts"
import { invalidField, type NotFound, notFound, type Unprocessable } from "../platform/Errors.ts"
import type { AddUser, CompanyView, CreateCompany, UpdateCompany } from "./Domain.ts"
import { countryCodeMessage } from "../platform/PhoneSchemas.ts"
import { knownCountry } from "../platform/Phones.ts"
import { offsetOf, type PageInfo, pageInfo } from "../platform/Pagination.ts"
import { PlatformRepo } from "./Repo.ts"
import { CredentialCache } from "../auth/Credentials.ts"

const companyNotFound = () => notFound("Company not found.")

export class PlatformAdmin extends Context.Service<PlatformAdmin, {
  createCompany(input: typeof CreateCompany.Type): Effect.Effect<{
    readonly company: CompanyView
    readonly admin: { readonly id: number; readonly email: string }
    readonly token: string
  }, Unprocessable>
  listCompanies(page: number, perPage: number): Effect.Effect<{ readonly items: ReadonlyArray<CompanyView>; readonly pagination: typeof PageInfo.Type }>
  getCompany(companyId: CompanyId): Effect.Effect<CompanyView, NotFound>
  updateCompany(companyId: CompanyId, input: typeof UpdateCompany.Type): Effect.Effect<CompanyView, NotFound | Unprocessable>
  addUser(companyId: CompanyId, input: typeof AddUser.Type): Effect.Effect<{ readonly id: number; readonly email: string }, NotFound | Unprocessable>
}>()("crm/platform-admin/PlatformAdmin") {
  static readonly layer = Layer.effect(
    PlatformAdmin,
    Effect.gen(function*() {
      const repo = yield* PlatformRepo
      const sql = yield* SqlClient.SqlClient
      const passwords = yield* Passwords
      const tokens = yield* Tokens
      const credentials = yield* CredentialCache

      const checkCountry = (code: string | null | undefined) =>
        code === null || code === undefined || knownCountry(code) ? Effect.void : Effect.fail(invalidField("default_country", countryCodeMessage))

      const serviceAccountEmail = (field: string, email: string) =>
        Effect.flatMap(repo.findUserByEmail(email), (user) =>
          Option.isSome(user) && user.value.is_service_account
            ? Effect.fail(invalidField(field, "This e-mail belongs to a service account."))
            : Effect.void)

      const createCompany = Effect.fn("PlatformAdmin.createCompany")(function*(input: typeof CreateCompany.Type) {
        yield* checkCountry(input.default_country)
        // Hash outside the transaction: it is the slow part and needs no lock.
        const passwordHash = yield* passwords.hash(input.admin.password)
        return yield* Effect.gen(function*() {
          yield* serviceAccountEmail("admin.email", input.admin.email)
          const company = yield* repo.insertCompany({
            name: input.name,
            plan: input.plan ?? "free",
            default_currency: input.default_currency ?? null,
            default_country: input.default_country ?? null,
            telephony_enabled: input.telephony_enabled ?? false
          })
          const admin = yield* repo.upsertUser({ email: input.admin.email, name: input.admin.name, password_hash: passwordHash })
          yield* repo.addMembership(CompanyId.make(company.id), admin.id, "admin")
          yield* credentials.forget([{ userId: admin.id }])
          const token = yield* tokens.createServiceToken(company.id, { name: "platform", description: "Created with the company" })
          return { company, admin, token: token.plaintext }
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
      })

      const listCompanies = Effect.fn("PlatformAdmin.listCompanies")(function*(page: number, perPage: number) {
        const { items, total } = yield* repo.listCompanies(offsetOf(page, perPage), perPage).pipe(Effect.orDie)
        return { items, pagination: pageInfo(page, perPage, total) }
      })

      const getCompany = Effect.fn("PlatformAdmin.getCompany")(function*(companyId: CompanyId) {
        const company = yield* repo.findCompany(companyId).pipe(Effect.orDie)
        if (Option.isNone(company)) return yield* companyNotFound()
        return company.value
      })

      const updateCompany = Effect.fn("PlatformAdmin.updateCompany")(
        function*(companyId: CompanyId, input: typeof UpdateCompany.Type) {
          yield* checkCountry(input.default_country)
          const patch = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined))
          if (Object.keys(patch).length === 0) return yield* getCompany(companyId)
          const company = yield* repo.updateCompany(companyId, patch).pipe(Effect.orDie)
          if (Option.isNone(company)) return yield* companyNotFound()
          // The plan is part of every resolved credential of the company.
          yield* credentials.forget([{ companyId }])
          return company.value
        }
      )

      const addUser = Effect.fn("PlatformAdmin.addUser")(function*(companyId: CompanyId, input: typeof AddUser.Type) {
        yield* getCompany(companyId)
        const passwordHash = yield* passwords.hash(input.password)
        return yield* Effect.gen(function*() {
          yield* serviceAccountEmail("email", input.email)
          const user = yield* repo.upsertUser({ email: input.email, name: input.name, password_hash: passwordHash })
          yield* repo.addMembership(companyId, user.id, input.role)
          yield* credentials.forget([{ userId: user.id }])
          return user
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
      })

      return PlatformAdmin.of({ createCompany, listCompanies, getCompany, updateCompany, addUser })
    })
  ).pipe(Layer.provide(PlatformRepo.layer))
}

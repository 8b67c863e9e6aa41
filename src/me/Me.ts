import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId, CurrentActor, requirePersonalCredential } from "../auth/Domain.ts"
import { Passwords } from "../auth/Passwords.ts"
import { type Role, rolePermissions } from "../auth/Permissions.ts"
import { Events } from "../events/Events.ts"
import { MediaRepo } from "../media/Repo.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import { AppConfig } from "../platform/Config.ts"
import { type Forbidden, forbidden, invalidField, type TooManyRequests, type Unprocessable } from "../platform/Errors.ts"
import { invalidPhoneMessage, normalizePhone } from "../platform/Phones.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { userPhotoUrl } from "../users/Links.ts"
import type { ChangePassword, Profile, UpdateProfile } from "./Domain.ts"
import { type ProfilePatch, MeRepo, type UserRow } from "./Repo.ts"
import { CredentialCache } from "../auth/Credentials.ts"

const profileFields = ["name", "lastname", "phone", "timezone", "locale", "photo_media_id"] as const

export const settableAvailability = ["online", "away", "offline"] as const

type ActiveCompany = { readonly id: number; readonly permissions: ReadonlySet<string>; readonly role: Role; readonly defaultCountry?: string | null } | null

const photoInvalid = () => invalidField("photo_media_id", "The selected photo media id must be an uploaded image of the company.")

/** IANA zone names only: Intl also takes offsets such as "+05:00", which carry no DST rules. */
const checkTimezone = (timeZone: string) =>
  Effect.gen(function*() {
    const invalid = () => invalidField("timezone", "The timezone must be a valid IANA time zone, e.g. Europe/Berlin.")
    if (!/^[A-Za-z][A-Za-z0-9_+\-]*(\/[A-Za-z0-9_+\-]+)*$/.test(timeZone)) return yield* invalid()
    yield* Effect.try({ try: () => new Intl.DateTimeFormat("en", { timeZone }), catch: invalid })
    return timeZone
  })

export class Me extends Context.Service<Me, {
  readonly profile: Effect.Effect<Profile, never, CurrentActor>
  updateProfile(input: UpdateProfile): Effect.Effect<Profile, Unprocessable, CurrentActor>
  changePassword(input: ChangePassword): Effect.Effect<{ readonly message: string }, Forbidden | Unprocessable | TooManyRequests, CurrentActor>
  setAvailability(status: string): Effect.Effect<{ readonly message: string; readonly availability: string }, Unprocessable, CurrentActor>
  switchCompany(companyId: number): Effect.Effect<Profile, Forbidden | Unprocessable, CurrentActor>
}>()("crm/me/Me") {
  static readonly layerNoDeps = Layer.effect(
    Me,
    Effect.gen(function*() {
      const repo = yield* MeRepo
      const credentials = yield* CredentialCache
      const sql = yield* SqlClient.SqlClient
      const events = yield* Events
      const passwords = yield* Passwords
      const limiter = yield* RateLimiter
      const config = yield* AppConfig
      const passwordRule = { limit: config.loginAttempts, windowSeconds: config.loginWindowSeconds }
      const media = yield* MediaRepo
      const signed = yield* SignedUrls
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

      const toProfile = (user: UserRow, company: ActiveCompany): Profile => {
        const { email_verified_at, photo_version, ...rest } = user
        return {
          ...rest,
          email_verified: email_verified_at !== null,
          // The active company is the one the credential resolved to; a stale current_company_id reads as none.
          current_company_id: company?.id ?? null,
          roles: company === null ? [] : [company.role],
          permissions: company === null ? [] : [...company.permissions],
          // The link names a company, and the photo route checks the membership there.
          photo_url: company === null ? null : userPhotoUrl(signed, company.id, user.id, photo_version)
        }
      }

      const profile = Effect.gen(function*() {
        const actor = yield* CurrentActor
        return toProfile(actor.account, actor.company)
      })

      /** `photo_media_id` as the stored photo: null clears, an id must be an image upload of the active company. */
      const photoOf = Effect.fnUntraced(function*(company: ActiveCompany, mediaId: number | null) {
        if (mediaId === null) return null
        if (company === null) return yield* photoInvalid()
        const found = (yield* media.find(CompanyId.make(company.id), [mediaId])).get(mediaId)
        if (found === undefined || found.type !== "image") return yield* photoInvalid()
        return { path: found.storage_path, mimeType: found.mime_type }
      })

      /** Blank removes the number; otherwise E.164, a national spelling read in the active company's country. */
      const phoneOf = Effect.fnUntraced(function*(company: ActiveCompany, value: string | null) {
        if (value === null || value.trim() === "") return null
        const country = company?.defaultCountry ?? null
        const phone = normalizePhone(value, country)
        if (phone === undefined) return yield* invalidField("phone", invalidPhoneMessage("phone", country))
        return phone
      })

      const updateProfile = Effect.fn("Me.updateProfile")(function*(input: UpdateProfile) {
        const actor = yield* CurrentActor
        // A body with none of the fields is a client mistake (a wrong form), not a no-op success.
        if (profileFields.every((field) => input[field] === undefined)) {
          return yield* invalidField("body", `Give at least one of: ${profileFields.join(", ")}.`)
        }
        const patch: ProfilePatch = {
          ...(input.name !== undefined ? { name: input.name.trim() } : {}),
          ...(input.lastname !== undefined ? { lastname: input.lastname } : {}),
          ...(input.phone !== undefined ? { phone: yield* phoneOf(actor.company, input.phone) } : {}),
          ...(input.timezone !== undefined ? { timezone: yield* checkTimezone(input.timezone) } : {}),
          ...(input.locale !== undefined ? { locale: input.locale } : {}),
          ...(input.photo_media_id !== undefined ? { photo: yield* photoOf(actor.company, input.photo_media_id) } : {})
        }
        const updated = yield* repo.updateProfile(actor.userId, patch, yield* now)
        // The account is part of the resolved credential (GET /v1/me reads it from there).
        yield* credentials.forget([{ userId: actor.userId }])
        return toProfile(updated, actor.company)
      })

      const changePassword = Effect.fn("Me.changePassword")(function*(input: ChangePassword) {
        const actor = yield* requirePersonalCredential
        // A stolen session must not become a way to guess the password at leisure.
        yield* limiter.enforce("global", `password-change:${actor.userId}`, passwordRule)
        const ok = yield* passwords.verify(yield* repo.findPasswordHash(actor.userId), input.current_password)
        if (!ok) return yield* invalidField("current_password", "The current password is incorrect.")
        const hash = yield* passwords.hash(input.password)
        const companyIds = yield* repo.replacePassword(
          actor.userId,
          hash,
          { sessionId: actor.sessionId, tokenId: actor.kind === "mobile" ? actor.tokenId : null },
          yield* now
        )
        // Subscriptions are granted to the user, not to one credential: all of them end, this
        // device's too (it authorizes again with the credential it kept).
        yield* credentials.forget([{ userId: actor.userId }], { userId: actor.userId, companyIds })
        return { message: "Password updated. Your other sessions and devices have been signed out." }
      })

      const setAvailability = Effect.fn("Me.setAvailability")(function*(status: string) {
        const actor = yield* CurrentActor
        if (status === "busy") {
          return yield* invalidField("status", "The busy status is set by the system (during calls) and cannot be chosen.")
        }
        if (!(settableAvailability as ReadonlyArray<string>).includes(status)) {
          return yield* invalidField("status", "The status must be one of: online, away, offline.")
        }
        const at = yield* now
        // Presence: colleagues in every company of the user see the change; setting the same status again is silent.
        yield* Effect.gen(function*() {
          const companies = yield* repo.setAvailability(actor.userId, status, at)
          yield* credentials.forget([{ userId: actor.userId }])
          for (const companyId of companies) {
            yield* events.emit(companyId, "member.availability.updated", { id: actor.userId, availability: status })
          }
        }).pipe(sql.withTransaction, Effect.orDie)
        return { message: "Availability updated.", availability: status }
      })

      const switchCompany = Effect.fn("Me.switchCompany")(function*(companyId: number) {
        const actor = yield* CurrentActor
        if (actor.isServiceAccount || actor.kind === "service") {
          return yield* forbidden("A service account is bound to its company and cannot switch.")
        }
        // One column for the whole account: every session and token follows on its next request.
        const switched = yield* repo.switchCompany(actor.userId, CompanyId.make(companyId), yield* now)
        if (Option.isNone(switched)) return yield* invalidField("company_id", "You are not a member of this company.")
        yield* credentials.forget([{ userId: actor.userId }])
        const role = switched.value.role
        return toProfile(yield* repo.findUser(actor.userId), { id: companyId, role, permissions: rolePermissions[role] })
      })

      return Me.of({ profile, updateProfile, changePassword, setAvailability, switchCompany })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([MeRepo.layer, MediaRepo.layer]))
}

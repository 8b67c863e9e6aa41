import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { type CompanyId, type CurrentActor, requirePermission } from "../auth/Domain.ts"
import { ChannelTypes } from "../providers/Domain.ts"
import { Events } from "../events/Events.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import {
  type Forbidden,
  invalidField,
  invalidFields,
  type NotFound,
  notFound,
  type Unprocessable,
  orNotFound
} from "../platform/Errors.ts"
import { type CustomFields, maxCustomFields } from "../platform/FreeForm.ts"
import { pageInfo } from "../platform/Pagination.ts"
import { invalidPhoneMessage, normalizePhone } from "../platform/Phones.ts"
import {
  type Contact,
  type CreateContact,
  type Identifier,
  type ListParams,
  type MergeContact,
  type MergeCounts,
  type ReplaceTags,
  type ResolvedIdentifier,
  type ResolveIdentifiers,
  type UpdateContact
} from "./Domain.ts"
import { type AccountValue, type ContactRecord, ContactsRepo, type EmailValue, type PhoneValue } from "./Repo.ts"

export const contactNotFound = () => notFound("Contact not found.")

/** 422 `{message, errors}` with the first message (and how many more) as the summary, like the decode errors. */
export const invalid = invalidFields

const channelLabels: Record<string, string> = {
  msgr_a: "Messenger A",
  msgr_a_business: "Messenger A Business",
  msgr_b: "Messenger B",
  msgr_c_business: "Messenger C Business"
}

const lookupLimit = 20

const blankToNull = (value: string | null | undefined) => {
  const trimmed = value?.trim() ?? ""
  return trimmed === "" ? null : trimmed
}

/** Phones in E.164 (national ones read in the company's country), each kept once (first spelling wins); 422 names every bad one. */
const phonesOf = (
  input: ReadonlyArray<{ readonly phone: string; readonly type?: string | undefined }>,
  defaultCountry: string | null
) => {
  const seen = new Set<string>()
  const out: Array<PhoneValue> = []
  const errors: Record<string, Array<string>> = {}
  for (const [index, item] of input.entries()) {
    const phone = normalizePhone(item.phone, defaultCountry)
    if (phone === undefined) {
      errors[`phones.${index}.phone`] = [invalidPhoneMessage("phone", defaultCountry)]
      continue
    }
    if (seen.has(phone)) continue
    seen.add(phone)
    out.push({ phone, type: item.type ?? "mobile" })
  }
  return Object.keys(errors).length > 0 ? Effect.fail(invalid(errors)) : Effect.succeed(out)
}

const emailsOf = (input: ReadonlyArray<{ readonly email: string; readonly type?: string | undefined }>): Array<EmailValue> => {
  const seen = new Set<string>()
  const out: Array<EmailValue> = []
  for (const item of input) {
    const email = item.email.trim()
    if (seen.has(email.toLowerCase())) continue
    seen.add(email.toLowerCase())
    out.push({ email, type: item.type ?? "work" })
  }
  return out
}

const accountsOf = (input: NonNullable<CreateContact["contactAccounts"]>): Array<AccountValue> => {
  const seen = new Set<string>()
  const out: Array<AccountValue> = []
  for (const item of input) {
    const externalId = item.external_id.trim()
    const key = `${item.channel_type}\u0000${externalId}`
    if (seen.has(key)) continue
    seen.add(key)
    out.push({
      channel_type: item.channel_type,
      external_id: externalId,
      username: item.username === undefined ? undefined : blankToNull(item.username),
      profile_picture: item.profile_picture === undefined ? undefined : blankToNull(item.profile_picture)
    })
  }
  return out
}

/** The name shown when none is given: the person's name, else a phone, an e-mail or an account handle. */
const derivedName = (parts: {
  readonly firstName: string | null
  readonly lastName: string | null
  readonly phones: ReadonlyArray<{ readonly phone: string }>
  readonly emails: ReadonlyArray<{ readonly email: string }>
  readonly accounts: ReadonlyArray<{ readonly username?: string | null | undefined; readonly external_id: string }>
}) =>
  [parts.firstName, parts.lastName].filter((p) => p !== null).join(" ") ||
  parts.phones[0]?.phone ||
  parts.emails[0]?.email ||
  parts.accounts[0]?.username ||
  parts.accounts[0]?.external_id ||
  ""

/**
 * The custom fields a write leaves: create keeps the non-null values; PATCH merges into the stored ones
 * (null removes a key, `custom_fields: null` all of them). More than the limit after the merge is 422.
 */
const customFieldsOf = (stored: Record<string, unknown>, input: CustomFields | null | undefined) => {
  if (input === undefined) return Effect.succeed(undefined)
  const merged: Record<string, unknown> = input === null ? {} : { ...stored }
  for (const [key, value] of Object.entries(input ?? {})) {
    if (value === null) delete merged[key]
    else merged[key] = value
  }
  return Object.keys(merged).length > maxCustomFields
    ? invalidField("custom_fields", `The custom fields field must not have more than ${maxCustomFields} keys.`)
    : Effect.succeed(merged)
}

interface IdentifierKeys {
  readonly identifier: Identifier
  readonly digits: string | null
  readonly username: string | null
  readonly externalId: string | null
  readonly type: string | null
  /** Why the identifier cannot match anything, answered on its own item. */
  readonly refusal: { readonly reason: "invalid_phone" | "no_identifier"; readonly message: string } | null
}

/** What an identifier can match by: phone digits in E.164 (national ones read in the company's country), a lower-case username without `@`, an external id. */
const identifierKeys = (identifier: Identifier, defaultCountry: string | null): IdentifierKeys => {
  const phone = blankToNull(identifier.phone)
  const username = blankToNull(identifier.username)?.replace(/^@/, "").toLowerCase() ?? null
  const externalId = blankToNull(identifier.external_id)
  const e164 = phone === null ? null : normalizePhone(phone, defaultCountry) ?? null
  const refusal = phone === null && username === null && externalId === null
    ? { reason: "no_identifier" as const, message: "Each identifier needs a phone, a username or an external_id." }
    : phone !== null && e164 === null
    ? { reason: "invalid_phone" as const, message: invalidPhoneMessage("phone", defaultCountry) }
    : null
  return { identifier, digits: e164?.slice(1) ?? null, username, externalId, type: identifier.channel_type ?? null, refusal }
}

const nothingToKnowBy = () =>
  invalidField("displayName", "A contact needs a name, a phone, an e-mail or a linked account.")

/** The signed photo route; the company rides in the signed query (`c`), the version (`v`) follows `updated_at`. */
export const contactPhotoPath = (id: number) => `/v1/contacts/${id}/photo`

const photoInvalid = () => invalidField("photo_media_id", "The selected photo media id must be an uploaded image of the company.")

const accountTaken = (index: number) =>
  invalidField(`contactAccounts.${index}.external_id`, "This account is already linked to another contact.")

export type ContactPage = { readonly items: ReadonlyArray<Contact>; readonly pagination: ReturnType<typeof pageInfo> }

export class Contacts extends Context.Service<Contacts, {
  list(params: ListParams): Effect.Effect<ContactPage, Forbidden, CurrentActor>
  lookup(q: string): Effect.Effect<ReadonlyArray<Contact>, Forbidden, CurrentActor>
  readonly channelOptions: Effect.Effect<ReadonlyArray<{ readonly channel_type: string; readonly label: string; readonly channels_count: number }>, Forbidden, CurrentActor>
  /** One answer per identifier, in order: the contact, or why there is none. */
  resolve(input: ResolveIdentifiers): Effect.Effect<ReadonlyArray<ResolvedIdentifier>, Forbidden, CurrentActor>
  get(id: number): Effect.Effect<Contact, Forbidden | NotFound, CurrentActor>
  create(input: CreateContact): Effect.Effect<Contact, Forbidden | Unprocessable, CurrentActor>
  update(id: number, input: UpdateContact): Effect.Effect<Contact, Forbidden | NotFound | Unprocessable, CurrentActor>
  remove(id: number): Effect.Effect<void, Forbidden | NotFound, CurrentActor>
  merge(id: number, input: MergeContact): Effect.Effect<{ readonly dryRun: boolean; readonly moved: MergeCounts; readonly contact: Contact }, Forbidden | NotFound | Unprocessable, CurrentActor>
  replaceTags(id: number, input: ReplaceTags): Effect.Effect<Contact, Forbidden | NotFound | Unprocessable, CurrentActor>
  /**
   * Tags added or removed without rewriting the lists (automation steps), for many contacts at once: one
   * read and, when tags change, one statement with the events `replaceTags` emits for them
   * (`contact.updated` with `changes: ["tags"]`, its `contact` carrying the id and the tags; `tag.added`
   * for an addition). Each change answers on its own, in order: whether it changed the contact (false:
   * nothing to change), or why it was refused.
   */
  changeTags(changes: ReadonlyArray<{ readonly id: number; readonly tagId: number }>, adding: boolean): Effect.Effect<
    ReadonlyArray<boolean | NotFound | Unprocessable>,
    Forbidden,
    CurrentActor
  >
  setOptOut(id: number, optedOut: boolean): Effect.Effect<{ readonly changed: boolean; readonly opted_out_at: string | null }, Forbidden | NotFound, CurrentActor>
}>()("crm/contacts/Contacts") {
  static readonly layerNoDeps = Layer.effect(
    Contacts,
    Effect.gen(function*() {
      const repo = yield* ContactsRepo
      const events = yield* Events
      const sql = yield* SqlClient.SqlClient
      const signed = yield* SignedUrls

      const view = (record: ContactRecord): Contact => {
        const { photo_path, photo_mime_type: _type, pictures, deleted: _deleted, ...contact } = record
        const hasPhoto = photo_path !== null || pictures.length > 0
        return {
          ...contact,
          // The version changes with the contact, so a cached image is not served after the photo changes.
          photo_url: hasPhoto
            ? signed.sign(contactPhotoPath(record.id), { params: { c: String(record.company_id), v: String(Date.parse(record.updated_at)) } })
            : null
        }
      }

      const transact = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        effect.pipe(sql.withTransaction, Effect.catchTag("SqlError", (e) => Effect.die(e)))

      const load = Effect.fnUntraced(function*(companyId: CompanyId, id: number) {
        return view(yield* orNotFound(yield* repo.find(companyId, id)))
      })

      /** `photo_media_id` as the photo columns: absent keeps, null clears, an id must be an image upload. */
      const photoOf = Effect.fnUntraced(function*(companyId: CompanyId, mediaId: number | null | undefined) {
        if (mediaId === undefined) return {}
        if (mediaId === null) return { photo_path: null, photo_mime_type: null }
        const media = yield* repo.mediaImage(companyId, mediaId)
        if (Option.isNone(media)) return yield* photoInvalid()
        return { photo_path: media.value.storage_path, photo_mime_type: media.value.mime_type }
      })

      const list = Effect.fn("Contacts.list")(function*(params: ListParams) {
        const company = yield* requirePermission("contact.view")
        const page = params.page ?? 1
        const perPage = params.perPage ?? 10
        const statusFilter = [...new Set([...(params["statuses[]"] ?? []), ...(params.statuses ?? [])])]
        const excludeLidOnly = params.exclude_lid_only !== "0" && params.exclude_lid_only !== "false"
        const result = yield* repo.list(company.id, { ...params, statusFilter, excludeLidOnly }, page, perPage)
        return { items: result.items.map(view), pagination: pageInfo(page, perPage, result.total) }
      })

      const lookup = Effect.fn("Contacts.lookup")(function*(q: string) {
        const company = yield* requirePermission("contact.view")
        return (yield* repo.lookup(company.id, q, lookupLimit)).map(view)
      })

      const channelOptions = Effect.gen(function*() {
        const company = yield* requirePermission("contact.view")
        const counts = yield* repo.channelCounts(company.id)
        return ChannelTypes.map((type) => ({ channel_type: type, label: channelLabels[type], channels_count: counts.get(type) ?? 0 }))
      }).pipe(Effect.withSpan("Contacts.channelOptions"))

      const resolve = Effect.fn("Contacts.resolve")(function*(input: ResolveIdentifiers) {
        const company = yield* requirePermission("contact.view")
        const parsed = input.identifiers.map((identifier) => identifierKeys(identifier, company.defaultCountry ?? null))
        const keys = (pick: (p: IdentifierKeys) => string | null) => [...new Set(parsed.flatMap((p) => { const k = pick(p); return k === null ? [] : [k] }))]
        const matches = yield* repo.resolve(company.id, {
          digits: keys((p) => p.digits),
          externalIds: keys((p) => p.externalId),
          usernames: keys((p) => p.username)
        })
        const ofType = (type: string | null) => (a: { readonly channel_type: string }) => type === null || a.channel_type === type
        return parsed.map((p): ResolvedIdentifier => {
          if (p.refusal !== null) return { identifier: p.identifier, contact_id: null, ...p.refusal }
          // The most specific key decides: an account id, then a number, then a username.
          const byId = p.externalId === null
            ? undefined
            : matches.accounts.find((a) => a.external_id === p.externalId && ofType(p.type)(a))
          const byPhone = p.digits === null ? undefined : matches.byDigits.get(p.digits)
          const byName = p.username === null
            ? undefined
            : matches.accounts.find((a) => a.username?.toLowerCase() === p.username && ofType(p.type)(a))
          const contactId = byId?.contact_id ?? byPhone ?? byName?.contact_id ?? null
          return { identifier: p.identifier, contact_id: contactId, reason: contactId === null ? "not_found" : null, message: null }
        })
      })

      const get = Effect.fn("Contacts.get")(function*(id: number) {
        const company = yield* requirePermission("contact.view")
        const record = yield* repo.find(company.id, id, { withMerged: true })
        if (Option.isNone(record)) return yield* contactNotFound()
        return view(record.value)
      })

      const create = Effect.fn("Contacts.create")(function*(input: CreateContact) {
        const company = yield* requirePermission("contact.create")
        const phones = yield* phonesOf(input.phones ?? [], (company.defaultCountry ?? null))
        const emails = emailsOf(input.emailes ?? [])
        const accounts = accountsOf(input.contactAccounts ?? [])
        const firstName = blankToNull(input.firstName)
        const lastName = blankToNull(input.lastName)
        const displayName = blankToNull(input.displayName) ?? derivedName({ firstName, lastName, phones, emails, accounts })
        if (displayName === "") return yield* nothingToKnowBy()
        const photo = yield* photoOf(company.id, input.photo_media_id)
        const customFields = yield* customFieldsOf({}, input.custom_fields)
        return yield* transact(Effect.gen(function*() {
          const id = yield* repo.insert(company.id, {
            custom_fields: JSON.stringify(customFields ?? {}),
            first_name: firstName,
            last_name: lastName,
            display_name: displayName,
            company_name: blankToNull(input.company),
            status: input.status ?? "lead",
            photo_path: photo.photo_path ?? null,
            photo_mime_type: photo.photo_mime_type ?? null
          })
          yield* repo.replacePhones(company.id, id, phones)
          yield* repo.replaceEmails(company.id, id, emails)
          yield* repo.replaceAccounts(company.id, id, accounts).pipe(Effect.catch((e) => Effect.fail(accountTaken(e.conflictAt))))
          const contact = yield* load(company.id, id)
          yield* events.emit(company.id, "contact.created", { contact, contact_id: id, source: "api" })
          return contact
        }))
      })

      const update = Effect.fn("Contacts.update")(function*(id: number, input: UpdateContact) {
        const company = yield* requirePermission("contact.update")
        return yield* transact(Effect.gen(function*() {
          const found = yield* repo.find(company.id, id, { forUpdate: true })
          if (Option.isNone(found)) return yield* contactNotFound()
          const photo = yield* photoOf(company.id, input.photo_media_id)
          const current = found.value
          const customFields = yield* customFieldsOf(current.custom_fields, input.custom_fields)
          const phones = input.phones === undefined ? undefined : yield* phonesOf(input.phones, (company.defaultCountry ?? null))
          const emails = input.emailes === undefined ? undefined : emailsOf(input.emailes)
          const accounts = input.contactAccounts === undefined ? undefined : accountsOf(input.contactAccounts)
          const firstName = input.firstName === undefined ? current.firstName : blankToNull(input.firstName)
          const lastName = input.lastName === undefined ? current.lastName : blankToNull(input.lastName)
          let displayName: string | undefined
          if (input.displayName !== undefined) {
            displayName = blankToNull(input.displayName) ?? derivedName({
              firstName,
              lastName,
              phones: phones ?? current.phones,
              emails: emails ?? current.emailes,
              accounts: accounts ?? current.contactAccounts
            })
            if (displayName === "") return yield* nothingToKnowBy()
          }
          yield* repo.update(company.id, id, {
            ...(input.firstName !== undefined ? { first_name: firstName } : {}),
            ...(input.lastName !== undefined ? { last_name: lastName } : {}),
            ...(displayName !== undefined ? { display_name: displayName } : {}),
            ...(input.company !== undefined ? { company_name: blankToNull(input.company) } : {}),
            ...(input.status !== undefined ? { status: input.status } : {}),
            ...(customFields !== undefined ? { custom_fields: JSON.stringify(customFields) } : {}),
            ...photo
          })
          if (phones !== undefined) yield* repo.replacePhones(company.id, id, phones)
          if (emails !== undefined) yield* repo.replaceEmails(company.id, id, emails)
          if (accounts !== undefined) {
            yield* repo.replaceAccounts(company.id, id, accounts).pipe(Effect.catch((e) => Effect.fail(accountTaken(e.conflictAt))))
          }
          const contact = yield* load(company.id, id)
          yield* events.emit(company.id, "contact.updated", {
            contact,
            contact_id: id,
            changes: Object.keys(input).filter((key) => (input as Record<string, unknown>)[key] !== undefined)
          })
          return contact
        }))
      })

      const remove = Effect.fn("Contacts.remove")(function*(id: number) {
        const company = yield* requirePermission("contact.delete")
        const deleted = yield* transact(Effect.gen(function*() {
          const deleted = yield* repo.softDelete(company.id, id)
          if (deleted) yield* events.emit(company.id, "contact.deleted", { contact_id: id })
          return deleted
        }))
        if (!deleted) return yield* contactNotFound()
      })

      const merge = Effect.fn("Contacts.merge")(function*(id: number, input: MergeContact) {
        const company = yield* requirePermission("contact.delete")
        const targetId = input.target_contact_id
        const dryRun = input.dry_run === true
        return yield* transact(Effect.gen(function*() {
          // Both rows locked in id order, so two opposite merges cannot deadlock.
          const [first, second] = id < targetId ? [id, targetId] : [targetId, id]
          const a = yield* repo.exists(company.id, first, !dryRun)
          const b = first === second ? a : yield* repo.exists(company.id, second, !dryRun)
          const source = id === first ? a : b
          const target = id === first ? b : a
          if (Option.isNone(source)) return yield* contactNotFound()
          if (targetId === id) return yield* invalidField("target_contact_id", "The target contact must be another contact.")
          if (Option.isNone(target)) return yield* invalidField("target_contact_id", "The selected target contact id is invalid.")
          const moved = yield* repo.mergeCounts(company.id, id, targetId)
          if (!dryRun) yield* repo.merge(company.id, id, targetId)
          const contact = yield* load(company.id, targetId)
          if (!dryRun) {
            yield* events.emit(company.id, "contact.merged", {
              source_contact_id: id,
              target_contact_id: targetId,
              contact_id: targetId,
              moved,
              contact
            })
          }
          return { dryRun, moved, contact }
        }))
      })

      const replaceTags = Effect.fn("Contacts.replaceTags")(function*(id: number, input: ReplaceTags) {
        const company = yield* requirePermission("contact.update")
        const tagIds = [...new Set(input.tag_ids)]
        const known = yield* repo.tagsOf(company.id, tagIds)
        const errors: Record<string, Array<string>> = {}
        input.tag_ids.forEach((tagId, index) => {
          if (!known.has(tagId)) errors[`tag_ids.${index}`] = [`The selected tag_ids.${index} is invalid.`]
        })
        return yield* transact(Effect.gen(function*() {
          if (Option.isNone(yield* repo.exists(company.id, id, true))) return yield* contactNotFound()
          if (Object.keys(errors).length > 0) return yield* invalid(errors)
          const before = new Set((yield* load(company.id, id)).tags.map((t) => t.id))
          yield* repo.replaceTags(company.id, id, tagIds)
          const contact = yield* load(company.id, id)
          yield* events.emit(company.id, "contact.updated", { contact, contact_id: id, changes: ["tags"] })
          for (const tagId of tagIds) {
            if (!before.has(tagId)) yield* events.emit(company.id, "tag.added", { contact_id: id, tag_id: tagId })
          }
          return contact
        }))
      })

      const changeTags = Effect.fn("Contacts.changeTags")(function*(changes: ReadonlyArray<{ readonly id: number; readonly tagId: number }>, adding: boolean) {
        const company = yield* requirePermission("contact.update")
        const state = yield* repo.taggings(company.id, [...new Set(changes.map((c) => c.id))], [...new Set(changes.map((c) => c.tagId))])
        const tagsOf = new Map(state.contacts)
        const pairs: Array<{ id: number; tagId: number }> = []
        const results = changes.map((change): boolean | NotFound | Unprocessable => {
          const tags = tagsOf.get(change.id)
          if (tags === undefined) return contactNotFound()
          const tag = state.tags.get(change.tagId)
          if (tag === undefined) return invalidField("tag_id", "The selected tag id is invalid.")
          if (tags.some((t) => t.id === change.tagId) === adding) return false
          tagsOf.set(change.id, adding
            ? [...tags, tag].sort((a, b) => a.name.toLowerCase().localeCompare(b.name.toLowerCase()) || a.id - b.id)
            : tags.filter((t) => t.id !== change.tagId))
          pairs.push(change)
          return true
        })
        if (pairs.length === 0) return results
        const write = repo.changeTags(company.id, pairs, adding)
        const touched = [...new Set(pairs.map((p) => p.id))]
        // Each conditional on its own row written: a change that raced this one is announced once, by its writer.
        yield* events.emitMany(company.id, [
          ...touched.map((id) => ({ key: "contact.updated", payload: { contact: { id, tags: tagsOf.get(id) }, contact_id: id, changes: ["tags"] } })),
          ...(adding ? pairs.map((p) => ({ key: "tag.added", payload: { contact_id: p.id, tag_id: p.tagId } })) : [])
        ], write.along, write.changedFor)
        return results
      })

      const setOptOut = Effect.fn("Contacts.setOptOut")(function*(id: number, optedOut: boolean) {
        const company = yield* requirePermission("contact.update")
        return yield* transact(Effect.gen(function*() {
          const current = yield* repo.exists(company.id, id, true)
          if (Option.isNone(current)) return yield* contactNotFound()
          const changed = yield* repo.setOptOut(company.id, id, optedOut)
          if (Option.isNone(changed)) {
            return { changed: false, opted_out_at: current.value.opted_out_at?.toISOString() ?? null }
          }
          const at = changed.value?.toISOString() ?? null
          yield* events.emit(
            company.id,
            optedOut ? "contact.opted_out" : "contact.opted_in",
            optedOut ? { contact_id: id, opted_out_at: at, source: "api" } : { contact_id: id, source: "api" }
          )
          return { changed: true, opted_out_at: at }
        }))
      })

      return Contacts.of({ list, lookup, channelOptions, resolve, get, create, update, remove, merge, replaceTags, changeTags, setOptOut })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(ContactsRepo.layer))
}

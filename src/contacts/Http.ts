import { Effect, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { ContactBlocking } from "./Blocking.ts"
import { Contacts } from "./Contacts.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import { signedCompany } from "../platform/files/SignedQuery.ts"
import { notFound } from "../platform/Errors.ts"
import { ContactEligibility } from "./Eligibility.ts"
import { ContactPhotos } from "./Photos.ts"

const optOutMessages = {
  true: { changed: "Contact opted out.", same: "Contact was already opted out." },
  false: { changed: "Contact opted in.", same: "Contact was not opted out." }
} as const

export const ContactsHttp = HttpApiBuilder.group(Api, "contacts", Effect.fn(function*(handlers) {
  const contacts = yield* Contacts
  const blocking = yield* ContactBlocking
  const eligibility = yield* ContactEligibility
  const optOut = (id: number, optedOut: boolean) =>
    Effect.map(contacts.setOptOut(id, optedOut), (r) => ({
      data: {
        message: optOutMessages[`${optedOut}`][r.changed ? "changed" : "same"],
        contact_id: id,
        opted_out_at: r.opted_out_at
      }
    }))
  return handlers
    .handle("list", ({ query }) => Effect.map(contacts.list(query), (data) => ({ data })))
    .handle("lookup", ({ query }) => Effect.map(contacts.lookup(query.q), (data) => ({ data })))
    .handle("channelOptions", () => Effect.map(contacts.channelOptions, (data) => ({ data })))
    .handle("resolveIdentifiers", ({ payload }) => Effect.map(contacts.resolve(payload), (data) => ({ data })))
    .handle("get", ({ params }) => Effect.map(contacts.get(params.contact), (data) => ({ data })))
    .handle("create", ({ payload }) => Effect.map(contacts.create(payload), (data) => ({ data })))
    .handle("update", ({ params, payload }) => Effect.map(contacts.update(params.contact, payload), (data) => ({ data })))
    .handle("delete", ({ params }) => Effect.as(contacts.remove(params.contact), { data: { message: "Contact deleted." } }))
    .handle("merge", ({ params, payload }) =>
      Effect.map(contacts.merge(params.contact, payload), (r) => ({
        data: {
          message: r.dryRun ? "Dry run: nothing was moved." : "Contact merged.",
          dry_run: r.dryRun,
          source_contact_id: params.contact,
          target_contact_id: payload.target_contact_id,
          moved: r.moved,
          contact: r.contact
        }
      })))
    .handle("replaceTags", ({ params, payload }) => Effect.map(contacts.replaceTags(params.contact, payload), (data) => ({ data })))
    .handle("optOut", ({ params }) => optOut(params.contact, true))
    .handle("optIn", ({ params }) => optOut(params.contact, false))
    .handle("blockPreview", ({ params }) => Effect.map(blocking.preview(params.contact), (data) => ({ data })))
    .handle("block", ({ params, payload }) => Effect.map(blocking.block(params.contact, payload ?? {}), (data) => ({ data })))
    .handle("unblock", ({ params }) => Effect.map(blocking.unblock(params.contact), (data) => ({ data })))
    .handle("outboundEligibility", ({ params, query }) =>
      Effect.map(eligibility.eligibility(params.contact, query.channel_id), (data) => ({ data: { eligibility: data } })))
    .handle("requestCallPermission", ({ params, payload }) =>
      Effect.map(eligibility.requestCallPermission(params.contact, payload.channel_id), (data) => ({ data: { eligibility: data } })))
}))

export const ContactPhotosHttp = HttpApiBuilder.group(Api, "contactPhotos", Effect.fn(function*(handlers) {
  const photos = yield* ContactPhotos
  const signed = yield* SignedUrls
  return handlers.handle("photo", ({ params, query }) =>
    Effect.gen(function*() {
      yield* signed.authorize
      const company = signedCompany(query.c)
      if (Option.isNone(company)) return yield* notFound("Contact not found.")
      return yield* photos.serve(company.value, params.contact)
    }))
}))

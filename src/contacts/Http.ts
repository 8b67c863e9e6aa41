import { Effect, Layer, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { CompanyId } from "../auth/Domain.ts"
import { data } from "../platform/Envelope.ts"
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
    data(Effect.map(contacts.setOptOut(id, optedOut), (r) => ({
      message: optOutMessages[`${optedOut}`][r.changed ? "changed" : "same"],
      contact_id: id,
      opted_out_at: r.opted_out_at
    })))
  return handlers
    .handle("list", ({ query }) => data(contacts.list(query)))
    .handle("lookup", ({ query }) => data(contacts.lookup(query.q)))
    .handle("channelOptions", () => data(contacts.channelOptions))
    .handle("resolveIdentifiers", ({ payload }) => data(contacts.resolve(payload)))
    .handle("get", ({ params }) => data(contacts.get(params.contact)))
    .handle("create", ({ payload }) => data(contacts.create(payload)))
    .handle("update", ({ params, payload }) => data(contacts.update(params.contact, payload)))
    .handle("delete", ({ params }) => Effect.as(contacts.remove(params.contact), { data: { message: "Contact deleted." } }))
    .handle("merge", ({ params, payload }) =>
      data(Effect.map(contacts.merge(params.contact, payload), (r) => ({
        message: r.dryRun ? "Dry run: nothing was moved." : "Contact merged.",
        dry_run: r.dryRun,
        source_contact_id: params.contact,
        target_contact_id: payload.target_contact_id,
        moved: r.moved,
        contact: r.contact
      }))))
    .handle("replaceTags", ({ params, payload }) => data(contacts.replaceTags(params.contact, payload)))
    .handle("optOut", ({ params }) => optOut(params.contact, true))
    .handle("optIn", ({ params }) => optOut(params.contact, false))
    .handle("blockPreview", ({ params }) => data(blocking.preview(params.contact)))
    .handle("block", ({ params, payload }) => data(blocking.block(params.contact, payload ?? {})))
    .handle("unblock", ({ params }) => data(blocking.unblock(params.contact)))
    .handle("outboundEligibility", ({ params, query }) =>
      data(Effect.map(eligibility.eligibility(params.contact, query.channel_id), (eligibility) => ({ eligibility }))))
    .handle("requestCallPermission", ({ params, payload }) =>
      data(Effect.map(eligibility.requestCallPermission(params.contact, payload.channel_id), (eligibility) => ({ eligibility }))))
})).pipe(Layer.provide([Contacts.layer, ContactBlocking.layer, ContactEligibility.layer]))

export const ContactPhotosHttp = HttpApiBuilder.group(Api, "contactPhotos", Effect.fn(function*(handlers) {
  const photos = yield* ContactPhotos
  const signed = yield* SignedUrls
  return handlers.handle("photo", ({ params, query }) =>
    Effect.gen(function*() {
      yield* signed.authorize
      const company = signedCompany(query.c)
      if (Option.isNone(company)) return yield* notFound("Contact not found.")
      return yield* photos.serve(CompanyId.make(company.value), params.contact)
    }))
})).pipe(Layer.provide(ContactPhotos.layer))

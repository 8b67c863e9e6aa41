import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, BadGateway, NotFound, Unprocessable } from "../platform/Errors.ts"
import { Paged } from "../platform/Pagination.ts"
import {
  BlockContact,
  BlockPreview,
  BlockResult,
  CallPermissionLimit,
  CallPermissionRequest,
  ChannelOption,
  Contact,
  ContactId,
  CreateContact,
  Eligibility,
  EligibilityQuery,
  ListQuery,
  LookupQuery,
  MergeContact,
  MergeResult,
  ReplaceTags,
  ResolvedIdentifier,
  ResolveIdentifiers,
  UpdateContact
} from "./Domain.ts"
import { SignedRouteErrors, signedQuery } from "../platform/files/SignedQuery.ts"

const Params = { contact: ContactId }
const One = Data(Contact)
const OptOutResult = Data(Schema.Struct({ message: Schema.String, contact_id: Schema.Int, opted_out_at: Schema.NullOr(Schema.String) }))

export class ContactsApi extends HttpApiGroup.make("contacts")
  .add(
    HttpApiEndpoint.get("list", "/v1/contacts", {
      query: ListQuery,
      success: Data(Paged(Contact)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "`statuses[]` filters by `active` and `inactive` only (`lead` is 422). `search` matches names, company, " +
        "e-mails, account usernames and external ids, and phone digits (3 or more). `exclude_lid_only` (default 1) hides " +
        "contacts whose only accounts are unresolved `@lid` identifiers and who have no phone."
    })),
    HttpApiEndpoint.get("lookup", "/v1/contacts/lookup", {
      query: LookupQuery,
      success: Data(Schema.Array(Contact)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Up to 20 contacts whose phones (by digits, 3 or more), account external ids or usernames contain `q`, newest first."
    })),
    HttpApiEndpoint.get("channelOptions", "/v1/contacts/channel-options", {
      success: Data(Schema.Array(ChannelOption)),
      error: AuthErrors
    }),
    HttpApiEndpoint.post("resolveIdentifiers", "/v1/contacts/resolve-identifiers", {
      payload: ResolveIdentifiers,
      success: Data(Schema.Array(ResolvedIdentifier)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "`{identifiers:[{phone?, username?, external_id?, channel_type?}]}` (1-500) → `data[{identifier, contact_id, " +
        "reason, message}]`, one answer per identifier in order. `reason` is null when a contact was found, else `not_found`, " +
        "`invalid_phone` (the phone does not parse; `message` says why) or `no_identifier` (none of phone, username, " +
        "external_id). Only a body of the wrong shape is 422 (not a list, empty, over 500, a value not a string, an unknown " +
        "channel_type). Phones are normalized to E.164 and compared by digits (contact phones, account numbers, msgr_a ids); " +
        "`channel_type` narrows username and external_id matches. The external id wins over the phone, the phone over the " +
        "username; among several contacts the oldest."
    })),
    HttpApiEndpoint.get("get", "/v1/contacts/:contact", {
      params: Params,
      success: One,
      error: [...AuthErrors, NotFound]
    }).annotateMerge(OpenApi.annotations({
      description: "A contact merged into another is still readable here: `merged_into_contact_id` says where it went."
    })),
    HttpApiEndpoint.post("create", "/v1/contacts", {
      payload: CreateContact,
      success: One.pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Every field is optional, but a contact needs a name, a phone, an e-mail or an account. `status` defaults to " +
        "`lead`; phones are stored in E.164; phone and e-mail `type` is `mobile`, `work`, `home` or `other` (defaults mobile " +
        "and work); `displayName` defaults to the name, else the first phone, e-mail or account handle."
    })),
    HttpApiEndpoint.patch("update", "/v1/contacts/:contact", {
      params: Params,
      payload: UpdateContact,
      success: One,
      error: [...AuthErrors, NotFound, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Absent keys stay. `phones`, `emailes` and `contactAccounts`, when present, are rebuilt from the body " +
        "(accounts that stay keep their ids and threads; an account's username and profile_picture change only when sent). " +
        "`custom_fields` is merged into the stored fields: a name with null is removed, `custom_fields: null` removes all."
    })),
    HttpApiEndpoint.delete("delete", "/v1/contacts/:contact", {
      params: Params,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, NotFound]
    }).annotateMerge(OpenApi.annotations({
      description: "Soft delete (permission contact.delete). The contact's conversations stay; its linked accounts are released, " +
        "so a new message from them starts a new lead."
    })),
    HttpApiEndpoint.post("merge", "/v1/contacts/:contact/merge", {
      params: Params,
      payload: MergeContact,
      success: Data(MergeResult),
      error: [...AuthErrors, NotFound, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Moves this contact's conversation (threads and messages), accounts, tags, new phones and e-mails into " +
        "`target_contact_id`, then soft-deletes it with `merged_into_contact_id` (permission contact.delete). The target keeps " +
        "its fields and fills empty ones from the source; an opt-out carries over, a block does not. `dry_run: true` answers " +
        "the counts without moving anything."
    })),
    HttpApiEndpoint.post("replaceTags", "/v1/contacts/:contact/tags", {
      params: Params,
      payload: ReplaceTags,
      success: One,
      error: [...AuthErrors, NotFound, Unprocessable]
    }).annotateMerge(OpenApi.annotations({ description: "Full replace of the contact's tags; answers the contact (`data.tags`)." })),
    HttpApiEndpoint.post("optOut", "/v1/contacts/:contact/opt-out", {
      params: Params,
      success: OptOutResult,
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.post("optIn", "/v1/contacts/:contact/opt-in", {
      params: Params,
      success: OptOutResult,
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.get("blockPreview", "/v1/contacts/:contact/block-preview", {
      params: Params,
      success: Data(BlockPreview),
      error: [...AuthErrors, NotFound]
    }).annotateMerge(OpenApi.annotations({
      description: "The msgr_a and msgr_a_business channels that have a thread with the contact and would get a provider block; " +
        "empty means a local block only. `window_open` is false on msgr_a_business without an inbound message in 24 hours."
    })),
    HttpApiEndpoint.post("block", "/v1/contacts/:contact/block", {
      params: Params,
      payload: [Schema.Null, BlockContact],
      success: Data(BlockResult),
      error: [...AuthErrors, NotFound, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Blocks locally first, then at the provider on every channel of the preview (best effort; failures in " +
        "`provider_failures`, the local block stands). A second block is a no-op. 6 changes an hour per contact, 60 an hour " +
        "and 300 a day per company (429)."
    })),
    HttpApiEndpoint.post("unblock", "/v1/contacts/:contact/unblock", {
      params: Params,
      success: Data(BlockResult),
      error: [...AuthErrors, NotFound]
    }),
    HttpApiEndpoint.get("outboundEligibility", "/v1/contacts/:contact/outbound-eligibility", {
      params: Params,
      query: EligibilityQuery,
      success: Data(Schema.Struct({ eligibility: Eligibility })),
      error: [...AuthErrors, NotFound, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Only when the company has telephony (404 otherwise). `channel_id`: a messenger channel, or `sip` (the default) " +
        "for the company's SIP trunk, which needs no permission. Calls over msgr_a_business need the contact's permission; " +
        "other messengers cannot call (`permission_status: unavailable`)."
    })),
    HttpApiEndpoint.post("requestCallPermission", "/v1/contacts/:contact/call-permission/request", {
      params: Params,
      payload: CallPermissionRequest,
      success: Data(Schema.Struct({ eligibility: Eligibility })),
      error: [...AuthErrors, NotFound, Unprocessable, CallPermissionLimit, BadGateway]
    }).annotateMerge(OpenApi.annotations({
      description: "Only when the company has telephony (404 otherwise); msgr_a_business channels. Sends the provider's " +
        "call-permission request (an interactive message, so only inside the 24-hour window: 422 `wa_window_closed`); the " +
        "contact's answer arrives through the provider webhook (sandbox: `POST /v1/channels/{id}/sandbox/call-permission`). " +
        "One request a day and two a week per contact and channel; beyond that 429 `{data:{message, eligibility}}` with " +
        "`request_cooldown_until`. A provider failure is 502 `{message}` and does not count as an attempt."
    }))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Contacts",
    description: "Contacts with their phones, e-mails (`emailes`), linked messenger accounts (`contactAccounts`) and tags; " +
      "merge, broadcast opt-out, blocking and outbound eligibility."
  }))
{}

/** Signed public route: the signature in the query is the authorization (no Authorization header). */
export class ContactPhotosApi extends HttpApiGroup.make("contactPhotos")
  .add(
    HttpApiEndpoint.get("photo", "/v1/contacts/:contact/photo", {
      params: Params,
      query: { ...signedQuery, v: Schema.optional(Schema.String) },
      success: Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "image/webp" })),
      error: SignedRouteErrors
    }).annotateMerge(OpenApi.annotations({
      description: "The contact's photo (`photo_url` of the contact), else the newest linked account's `profile_picture`. " +
        "A decodable image wider than 256 px is answered as a WebP preview 256 px wide, anything else as the original; " +
        "the original cannot be asked for. 2000 requests a minute per IP; 403 `Invalid signature.`, 404 when there is no photo."
    }))
  )
  .annotateMerge(OpenApi.annotations({ title: "Contact photos" }))
{}

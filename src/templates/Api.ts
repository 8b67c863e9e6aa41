import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { IdempotencyKeyHeader, Message } from "../messages/Domain.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, Conflict, NotFound, ServiceUnavailable, Unprocessable } from "../platform/Errors.ts"
import { PageInfo } from "../platform/Pagination.ts"
import {
  AddLanguage,
  AssignChannels,
  Availability,
  ChannelTypeRef,
  CreateTemplate,
  Facets,
  ListQuery,
  SandboxTemplateStatus,
  SendTemplate,
  Submitted,
  SyncStarted,
  Template,
  TemplateEvent,
  TemplateId,
  UpdateTemplate,
  Version
} from "./Domain.ts"

const Params = { template: TemplateId }
const One = Data(Template)
const Versions = Data(Schema.Array(Version))
const Errors = [...AuthErrors, NotFound, Unprocessable]
const Update = { params: Params, payload: UpdateTemplate, success: One, error: Errors } as const
const Transition = { params: Params, success: One, error: Errors } as const

const doc = (summary: string, description?: string) =>
  OpenApi.annotations(description === undefined ? { summary } : { summary, description })

export class TemplatesApi extends HttpApiGroup.make("templates")
  .add(
    HttpApiEndpoint.get("list", "/v1/templates", {
      query: ListQuery,
      success: Data(Schema.Struct({ items: Schema.Array(Template), pagination: PageInfo, facets: Schema.optional(Facets) })),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(doc(
      "List logical templates",
      "One row per logical template (its first instance, with the `logical_template` aggregate). `perPage` 1-100, default 20; " +
        "`sortBy` name, created_at (default) or updated_at. `includeFacets=true` adds counts per status, language and channel type."
    )),
    HttpApiEndpoint.get("channelTypes", "/v1/templates/channel-types", {
      success: Data(Schema.Array(ChannelTypeRef)),
      error: AuthErrors
    }).annotateMerge(doc("Channel types templates can be created for")),
    HttpApiEndpoint.post("sync", "/v1/templates/sync", {
      success: Data(SyncStarted).pipe(HttpApiSchema.status(202)),
      error: AuthErrors
    }).annotateMerge(doc(
      "Refresh moderation statuses from the providers",
      "Queues a sync of the company's submitted instances and answers at once (202); while one is queued, another " +
        "request queues nothing more (`already_queued: true`). The sync reads each channel's template list from its " +
        "provider and updates `meta_status` and `last_synced_at` of the instances it lists, with their `template.meta_*` " +
        "events. Sandbox channels approve pending instances unless their settings say `template_review: \"manual\"`."
    )),
    HttpApiEndpoint.post("create", "/v1/templates", {
      payload: CreateTemplate,
      success: Data(Schema.Struct({ message: Schema.String, template: Template })).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(doc(
      "Create a logical template",
      "One instance per `channel_ids` entry (none: one unassigned instance), status draft, meta_status local; submit sends them to review."
    )),
    HttpApiEndpoint.get("get", "/v1/templates/:template", {
      params: Params,
      success: One,
      error: [...AuthErrors, NotFound]
    }).annotateMerge(doc("Get a template", "`{template}` is an instance id (that instance) or a group id (its first instance).")),
    HttpApiEndpoint.patch("update", "/v1/templates/:template", Update).annotateMerge(doc(
      "Update a draft template",
      "Changes every instance of the same language; instances already reviewed return to meta_status local."
    )),
    HttpApiEndpoint.post("updateByPost", "/v1/templates/:template", Update).annotateMerge(doc("Update a draft template (POST alias)")),
    HttpApiEndpoint.delete("delete", "/v1/templates/:template", {
      params: Params,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, NotFound]
    }).annotateMerge(doc("Delete a template", "Deletes every instance; each is removed from its provider too (best effort).")),
    HttpApiEndpoint.get("channels", "/v1/templates/:template/channels", {
      params: Params,
      success: Data(Schema.Array(Availability)),
      error: [...AuthErrors, NotFound]
    }).annotateMerge(doc("Channel availability of a template")),
    HttpApiEndpoint.post("assignChannels", "/v1/templates/:template/channels", {
      params: Params,
      payload: AssignChannels,
      success: Data(Schema.Struct({ message: Schema.String, items: Schema.Array(Availability) })),
      error: Errors
    }).annotateMerge(doc(
      "Assign channels",
      "One instance per new channel and language; on a published template the new instances are submitted at once."
    )),
    HttpApiEndpoint.get("events", "/v1/templates/:template/events", {
      params: Params,
      success: Data(Schema.Array(TemplateEvent)),
      error: [...AuthErrors, NotFound]
    }).annotateMerge(doc("Event history of the logical template", "Newest first.")),
    HttpApiEndpoint.post("addLanguage", "/v1/templates/:template/languages", {
      params: Params,
      payload: AddLanguage,
      success: Versions.pipe(HttpApiSchema.status(201)),
      error: Errors
    }).annotateMerge(doc("Add a language", "One instance per assigned channel; 422 when no channel is assigned or the language exists.")),
    HttpApiEndpoint.delete("deleteLanguage", "/v1/templates/:template/languages/:language", {
      params: { template: TemplateId, language: Schema.String },
      success: Versions,
      error: Errors
    }).annotateMerge(doc("Delete a language", "422 for the only language.")),
    HttpApiEndpoint.post("submit", "/v1/templates/:template/submit", {
      params: Params,
      success: Data(Submitted),
      error: Errors
    }).annotateMerge(doc("Submit every assigned instance for review", "`results` gives each instance's outcome.")),
    HttpApiEndpoint.post("publish", "/v1/templates/:template/publish", Transition).annotateMerge(
      doc("Publish an approved template", "422 `template_not_approved` unless an instance is approved.")
    ),
    HttpApiEndpoint.post("archive", "/v1/templates/:template/archive", Transition).annotateMerge(doc("Archive a template")),
    HttpApiEndpoint.post("unarchive", "/v1/templates/:template/unarchive", Transition).annotateMerge(
      doc("Unarchive a template", "Back to published when an instance is approved, else to draft.")
    ),
    HttpApiEndpoint.post("sandboxStatus", "/v1/channels/:channel/sandbox/template-status", {
      params: { channel: Schema.Int },
      payload: SandboxTemplateStatus,
      success: One,
      error: Errors
    }).annotateMerge(doc(
      "Decide a sandbox template review",
      "Sets the provider verdict of a submitted instance on a sandbox channel, as a provider notification would."
    )),
    HttpApiEndpoint.post("send", "/v1/messages/send-template", {
      payload: SendTemplate,
      headers: IdempotencyKeyHeader,
      success: Data(Message).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, NotFound, Unprocessable, Conflict, ServiceUnavailable]
    }).annotateMerge(doc(
      "Send an approved template",
      "To exactly one of `thread_id`, `contact_id` or `to`; no 24-hour window applies. `template_id` is a group or instance id; " +
        "the approved instance of `channel_id` and `language` (default: that instance's, else the group's first language) is sent."
    ))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Message templates",
    description: "Logical templates rolled out over business-messenger channels and languages, each instance moderated by the provider."
  }))
{}

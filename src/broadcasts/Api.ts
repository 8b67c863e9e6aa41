import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication, PlanGate, requiresFeature } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, BadGateway, Conflict, NotFound, ServiceUnavailable, Unprocessable } from "../platform/Errors.ts"
import { Paged } from "../platform/Pagination.ts"
import {
  AssistInput,
  AssistOutput,
  Broadcast,
  BroadcastId,
  BroadcastInput,
  BroadcastPatch,
  Estimate,
  EstimateInput,
  Meta,
  Recipient,
  Run,
  RunId,
  TestInput
} from "./Domain.ts"

const One = { broadcast: BroadcastId }
const OneRun = { broadcast: BroadcastId, run: RunId }
const Read = [...AuthErrors, NotFound]
const Write = [...AuthErrors, NotFound, Unprocessable]
const summary = (text: string) => OpenApi.annotations({ summary: text })
const Statuses = Schema.optional(Schema.Union([Schema.String, Schema.Array(Schema.String)]))

export class BroadcastsApi extends HttpApiGroup.make("broadcasts")
  .add(
    HttpApiEndpoint.get("meta", "/v1/broadcasts/meta", { success: Data(Meta), error: AuthErrors })
      .annotateMerge(summary("Builder metadata: segments, contact variables, templates")),
    HttpApiEndpoint.get("list", "/v1/broadcasts", {
      query: {
        page: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
        perPage: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 }))),
        "statuses[]": Statuses,
        statuses: Statuses
      },
      success: Data(Paged(Broadcast)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(summary("List broadcasts, newest first; filter `statuses[]`")),
    HttpApiEndpoint.post("create", "/v1/broadcasts", {
      payload: BroadcastInput,
      success: Data(Broadcast).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(summary("Create a broadcast (draft with is_draft, else launched or scheduled)")),
    HttpApiEndpoint.post("estimate", "/v1/broadcasts/estimate", {
      payload: EstimateInput,
      success: Data(Estimate),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(summary("Audience estimate for a segment over channels")),
    HttpApiEndpoint.post("test", "/v1/broadcasts/test", {
      payload: TestInput,
      success: Data(Schema.Struct({ message: Schema.String, message_id: Schema.Int })),
      error: [...AuthErrors, NotFound, Unprocessable, Conflict, ServiceUnavailable]
    }).annotateMerge(summary("Send one test message to a provider user id or phone")),
    HttpApiEndpoint.post("assist", "/v1/broadcasts/assist", {
      payload: AssistInput,
      success: Data(AssistOutput),
      error: [...AuthErrors, Unprocessable, ServiceUnavailable, BadGateway]
    }).annotateMerge(summary("Generate or improve broadcast text (60 per hour per company)")),
    HttpApiEndpoint.get("get", "/v1/broadcasts/:broadcast", { params: One, success: Data(Broadcast), error: Read })
      .annotateMerge(summary("One broadcast with its runs and stats")),
    HttpApiEndpoint.patch("update", "/v1/broadcasts/:broadcast", { params: One, payload: BroadcastPatch, success: Data(Broadcast), error: Write })
      .annotateMerge(summary("Update a draft or scheduled broadcast")),
    HttpApiEndpoint.post("updatePost", "/v1/broadcasts/:broadcast", { params: One, payload: BroadcastPatch, success: Data(Broadcast), error: Write })
      .annotateMerge(summary("Update a draft or scheduled broadcast (POST alias)")),
    HttpApiEndpoint.delete("delete", "/v1/broadcasts/:broadcast", { params: One, success: Data(Schema.Struct({ message: Schema.String })), error: Read })
      .annotateMerge(summary("Delete a broadcast (its runs in progress are cancelled)")),
    HttpApiEndpoint.post("duplicate", "/v1/broadcasts/:broadcast/duplicate", { params: One, success: Data(Broadcast).pipe(HttpApiSchema.status(201)), error: Read })
      .annotateMerge(summary("Copy a broadcast as a new draft")),
    HttpApiEndpoint.post("publish", "/v1/broadcasts/:broadcast/publish", { params: One, success: Data(Broadcast), error: Write })
      .annotateMerge(summary("Launch or schedule a draft")),
    HttpApiEndpoint.post("cancel", "/v1/broadcasts/:broadcast/cancel", { params: One, success: Data(Broadcast), error: Write })
      .annotateMerge(summary("Cancel a one-off broadcast")),
    HttpApiEndpoint.post("run", "/v1/broadcasts/:broadcast/run", { params: One, success: Data(Broadcast), error: Write })
      .annotateMerge(summary("Start a run now")),
    HttpApiEndpoint.get("messages", "/v1/broadcasts/:broadcast/messages", {
      params: One,
      query: {
        status: Schema.optional(Schema.Literals(["pending", "sending", "sent", "delivered", "read", "failed", "skipped"])),
        page: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
        per_page: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 100 })))
      },
      success: Schema.Struct({
        data: Schema.Array(Recipient),
        meta: Schema.Struct({ current_page: Schema.Int, last_page: Schema.Int, per_page: Schema.Int, total: Schema.Int })
      }),
      error: [...Read, Unprocessable]
    }).annotateMerge(summary("Recipients of a broadcast; filter `status`, `per_page`")),
    HttpApiEndpoint.get("runs", "/v1/broadcasts/:broadcast/runs", { params: One, success: Data(Schema.Array(Run)), error: Read })
      .annotateMerge(summary("Runs of a broadcast, newest first")),
    HttpApiEndpoint.get("getRun", "/v1/broadcasts/:broadcast/runs/:run", { params: OneRun, success: Data(Run), error: Read })
      .annotateMerge(summary("One run with its counts")),
    HttpApiEndpoint.post("pauseRecurring", "/v1/broadcasts/:broadcast/pause-recurring", { params: One, success: Data(Broadcast), error: Write })
      .annotateMerge(summary("Pause a recurring schedule")),
    HttpApiEndpoint.post("resumeRecurring", "/v1/broadcasts/:broadcast/resume-recurring", { params: One, success: Data(Broadcast), error: Write })
      .annotateMerge(summary("Resume a recurring schedule from its next occurrence")),
    HttpApiEndpoint.post("pauseRun", "/v1/broadcasts/:broadcast/runs/:run/pause", { params: OneRun, success: Data(Run), error: Write })
      .annotateMerge(summary("Pause a run")),
    HttpApiEndpoint.post("resumeRun", "/v1/broadcasts/:broadcast/runs/:run/resume", { params: OneRun, success: Data(Run), error: Write })
      .annotateMerge(summary("Resume a paused run")),
    HttpApiEndpoint.post("cancelRun", "/v1/broadcasts/:broadcast/runs/:run/cancel", { params: OneRun, success: Data(Run), error: Write })
      .annotateMerge(summary("Cancel a run; its pending recipients become skipped")),
    HttpApiEndpoint.post("retryFailed", "/v1/broadcasts/:broadcast/runs/:run/retry-failed", { params: OneRun, success: Data(Run), error: Write })
      .annotateMerge(summary("Resend to the run's failed recipients only"))
  )
  .middleware(PlanGate)
  .middleware(Authentication)
  .annotateEndpointsMerge(requiresFeature("broadcasts"))
  .annotateMerge(OpenApi.annotations({
    title: "Broadcasts",
    description: "Bulk sends to a segment over one or more channels, with A/B variants, rate control, send windows, click " +
      "tracking and runs. Plan feature `broadcasts`; permissions `broadcast.*`."
  }))
{}

/** Public click redirects (no authentication): the links that `trackClicks` puts into messages. */
export class BroadcastClicksApi extends HttpApiGroup.make("broadcastClicks")
  .add(
    HttpApiEndpoint.get("click", "/r/:code", {
      params: { code: Schema.String },
      success: Schema.Void.pipe(HttpApiSchema.status(302)),
      error: NotFound
    }).annotateMerge(summary("Record a click and redirect (302) to the original link"))
  )
  .annotateMerge(OpenApi.annotations({ title: "Broadcast clicks", description: "Tracked links of broadcast messages." }))
{}

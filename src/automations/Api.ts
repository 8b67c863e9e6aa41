import { Schema } from "effect"
import { Multipart } from "effect/http"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, NotFound, Unprocessable } from "../platform/Errors.ts"
import { Paged } from "../platform/Pagination.ts"
import {
  Automation,
  AutomationDetail,
  Bootstrap,
  CreateAutomation,
  Graph,
  Run,
  RunDetail,
  RunsQuery,
  UpdateAutomation,
  VoiceMedia
} from "./Domain.ts"

const Params = { automation: Schema.String }
const summary = (text: string) => OpenApi.annotations({ summary: text })

const voiceLimit = 16 * 1024 * 1024
const VoiceForm = Schema.Struct({ file: Multipart.SingleFileSchema }).pipe(HttpApiSchema.asMultipartStream({
  maxParts: 10,
  maxFieldSize: 64 * 1024,
  maxFileSize: voiceLimit + 64 * 1024,
  maxTotalSize: voiceLimit + 1024 * 1024
}))
const NotAForm = Schema.Struct({ file: Schema.Never })

export class AutomationsApi extends HttpApiGroup.make("automations")
  .add(
    HttpApiEndpoint.get("bootstrap", "/v1/automations/bootstrap", {
      success: Data(Bootstrap),
      error: AuthErrors
    }).annotateMerge(summary("Editor reference data: the company's automations and graphs, recent runs, the action catalog with JSON Schemas")),
    HttpApiEndpoint.get("list", "/v1/automations", {
      success: Data(Schema.Array(Automation)),
      error: AuthErrors
    }).annotateMerge(summary("The company's automations")),
    HttpApiEndpoint.post("voice", "/v1/automations/media/voice", {
      payload: [VoiceForm, NotAForm],
      success: VoiceMedia.pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(summary("A voice note (multipart `file`, 16 MB) for the messenger send actions, as Opus in Ogg; flat answer")),
    HttpApiEndpoint.get("get", "/v1/automations/:automation", {
      params: Params,
      success: Data(AutomationDetail),
      error: [...AuthErrors, NotFound]
    }).annotateMerge(summary("One automation with the graph of its latest version")),
    HttpApiEndpoint.post("create", "/v1/automations", {
      payload: CreateAutomation,
      success: Data(AutomationDetail).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(summary("Creates an automation (draft unless told otherwise; active needs a graph)")),
    HttpApiEndpoint.patch("update", "/v1/automations/:automation", {
      params: Params,
      payload: UpdateAutomation,
      success: Data(AutomationDetail),
      error: [...AuthErrors, NotFound, Unprocessable]
    }).annotateMerge(summary("Name, description, status; active publishes the latest version")),
    HttpApiEndpoint.patch("builder", "/v1/automations/:automation/builder", {
      params: Params,
      payload: Graph,
      success: Data(AutomationDetail),
      error: [...AuthErrors, NotFound, Unprocessable]
    }).annotateMerge(summary("Saves the graph as a new immutable version (published at once when the automation is active)")),
    HttpApiEndpoint.delete("delete", "/v1/automations/:automation", {
      params: Params,
      success: Data(Schema.Struct({ message: Schema.String })),
      error: [...AuthErrors, NotFound]
    }).annotateMerge(summary("Deletes an automation, its versions and runs")),
    HttpApiEndpoint.get("runs", "/v1/automations/:automation/runs", {
      params: Params,
      query: RunsQuery,
      success: Data(Paged(Run)),
      error: [...AuthErrors, NotFound]
    }).annotateMerge(summary("The automation's runs, newest first")),
    HttpApiEndpoint.get("run", "/v1/automations/:automation/runs/:run", {
      params: { ...Params, run: Schema.String },
      success: Data(RunDetail),
      error: [...AuthErrors, NotFound]
    }).annotateMerge(summary("One run with its steps"))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({
    title: "Automations",
    description: "Trigger plus graph of nodes and edges, versioned; runs are durable (a wait survives restarts) and logged with their steps."
  }))
{}

import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication, PlanGate, requiresFeature } from "../auth/Middleware.ts"
import { Data } from "../platform/Envelope.ts"
import { AuthErrors, NotFound, Unprocessable } from "../platform/Errors.ts"
import { Paged } from "../platform/Pagination.ts"
import {
  Activity,
  CreateDeal,
  CreateTask,
  Deal,
  DealChanges,
  DealListQuery,
  DealSettings,
  DealSettingsInput,
  DealType,
  DealTypeInput,
  DealTypePatch,
  Funnel,
  FunnelInput,
  FunnelPatch,
  Id,
  LostReason,
  LostReasonInput,
  LostReasonPatch,
  Message,
  NoteInput,
  PageQuery,
  Stage,
  StageInput,
  StagePatch,
  Task,
  TaskListQuery,
  UpdateDeal,
  UpdateTask
} from "./Domain.ts"

const Read = [...AuthErrors, NotFound]
const Write = [...AuthErrors, NotFound, Unprocessable]
const gate = "Every endpoint needs the plan feature `deals` (403 `feature_not_available` otherwise)."

export class FunnelsApi extends HttpApiGroup.make("funnels")
  .add(
    HttpApiEndpoint.get("list", "/v1/funnels", { success: Data(Schema.Array(Funnel)), error: AuthErrors }),
    HttpApiEndpoint.post("create", "/v1/funnels", {
      payload: FunnelInput,
      success: Data(Funnel).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.get("get", "/v1/funnels/:funnel", { params: { funnel: Id }, success: Data(Funnel), error: Read }),
    HttpApiEndpoint.patch("update", "/v1/funnels/:funnel", {
      params: { funnel: Id },
      payload: FunnelPatch,
      success: Data(Funnel),
      error: Write
    }),
    HttpApiEndpoint.delete("delete", "/v1/funnels/:funnel", { params: { funnel: Id }, success: Data(Message), error: Write }),
    HttpApiEndpoint.post("addStage", "/v1/funnels/:funnel/stages", {
      params: { funnel: Id },
      payload: StageInput,
      success: Data(Stage).pipe(HttpApiSchema.status(201)),
      error: Write
    }),
    HttpApiEndpoint.patch("updateStage", "/v1/funnels/:funnel/stages/:stage", {
      params: { funnel: Id, stage: Id },
      payload: StagePatch,
      success: Data(Stage),
      error: Write
    }),
    HttpApiEndpoint.delete("deleteStage", "/v1/funnels/:funnel/stages/:stage", {
      params: { funnel: Id, stage: Id },
      success: Data(Message),
      error: Write
    })
  )
  .middleware(PlanGate)
  .middleware(Authentication)
  .annotateEndpointsMerge(requiresFeature("deals"))
  .annotateMerge(OpenApi.annotations({
    title: "Funnels",
    description: "Not shown in the spec: the funnels and stages deals are filed under. A stage's `type` is `open`, `success` or " +
      "`failed`; a funnel keeps at least one `open` stage; without `stages` a new funnel gets New/Won/Lost. The company's first " +
      "funnel is its default. Deleting a funnel or stage that holds deals (soft-deleted ones included) is 422. Reading needs " +
      "`deal.view`, editing `lost_reason.manage`. " + gate
  }))
{}

export class DealTypesApi extends HttpApiGroup.make("dealTypes")
  .add(
    HttpApiEndpoint.get("list", "/v1/deal-types", { success: Data(Schema.Array(DealType)), error: AuthErrors }),
    HttpApiEndpoint.post("create", "/v1/deal-types", {
      payload: DealTypeInput,
      success: Data(DealType).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.patch("update", "/v1/deal-types/:dealType", {
      params: { dealType: Id },
      payload: DealTypePatch,
      success: Data(DealType),
      error: Write
    }),
    HttpApiEndpoint.delete("delete", "/v1/deal-types/:dealType", { params: { dealType: Id }, success: Data(Message), error: Read })
  )
  .middleware(PlanGate)
  .middleware(Authentication)
  .annotateEndpointsMerge(requiresFeature("deals"))
  .annotateMerge(OpenApi.annotations({
    title: "Deal types",
    description: "`{id, name, order}`; deleting a type leaves its deals without one. Reading needs `deal.view`, editing " +
      "`lost_reason.manage`. " + gate
  }))
{}

export class LostReasonsApi extends HttpApiGroup.make("lostReasons")
  .add(
    HttpApiEndpoint.get("list", "/v1/lost-reasons", { success: Data(Schema.Array(LostReason)), error: AuthErrors }),
    HttpApiEndpoint.post("create", "/v1/lost-reasons", {
      payload: LostReasonInput,
      success: Data(LostReason).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.patch("update", "/v1/lost-reasons/:lostReason", {
      params: { lostReason: Id },
      payload: LostReasonPatch,
      success: Data(LostReason),
      error: Write
    }),
    HttpApiEndpoint.delete("delete", "/v1/lost-reasons/:lostReason", {
      params: { lostReason: Id },
      success: Data(Message),
      error: Read
    })
  )
  .middleware(PlanGate)
  .middleware(Authentication)
  .annotateEndpointsMerge(requiresFeature("deals"))
  .annotateMerge(OpenApi.annotations({
    title: "Lost reasons",
    description: "Names are unique per company ignoring case (422 on `name`). Editing needs `lost_reason.manage`. Only active " +
      "reasons can be given when losing a deal. " + gate
  }))
{}

export class DealsApi extends HttpApiGroup.make("deals")
  .add(
    HttpApiEndpoint.get("list", "/v1/deals", {
      query: DealListQuery,
      success: Data(Paged(Deal)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Live deals newest first; filters `funnel_id`, `funnel_stage_id`, `status`, `contact_id`, " +
        "`responsible_user_id`; `perPage` 1-100 (default 20)."
    })),
    HttpApiEndpoint.post("create", "/v1/deals", {
      payload: CreateDeal,
      success: Data(Deal).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "`contact_id` and `title` are required. Without a stage the deal goes to the default funnel's first open " +
        "stage; `funnel_id` needs `funnel_stage_id`. `amount` is a decimal string (default \"0.00\"), `currency` defaults to the " +
        "company's (KZT when unset), `responsible_user_id` to the caller, `source` to `manual`."
    })),
    HttpApiEndpoint.get("get", "/v1/deals/:deal", { params: { deal: Id }, success: Data(Deal), error: Read }),
    HttpApiEndpoint.post("update", "/v1/deals/:deal", {
      params: { deal: Id },
      payload: UpdateDeal,
      success: Data(DealChanges),
      error: Write
    }).annotateMerge(OpenApi.annotations({
      description: "Answers `id` and the fields whose values changed. A new stage without `status` takes the stage type's status; " +
        "won and lost snapshot closed_amount, closed_currency and closed_at; reopening clears them."
    })),
    HttpApiEndpoint.delete("delete", "/v1/deals/:deal", { params: { deal: Id }, success: Data(Message), error: Read }),
    HttpApiEndpoint.post("restore", "/v1/deals/:deal/restore", { params: { deal: Id }, success: Data(Deal), error: Read }),
    HttpApiEndpoint.get("activities", "/v1/deals/:deal/activities", {
      params: { deal: Id },
      query: PageQuery,
      success: Data(Paged(Activity)),
      error: Write
    }),
    HttpApiEndpoint.post("addNote", "/v1/deals/:deal/notes", {
      params: { deal: Id },
      payload: NoteInput,
      success: Data(Schema.Struct({ message: Schema.String, item: Activity })).pipe(HttpApiSchema.status(201)),
      error: Write
    }),
    HttpApiEndpoint.get("tasks", "/v1/deals/:deal/tasks", { params: { deal: Id }, success: Data(Schema.Array(Task)), error: Read })
  )
  .middleware(PlanGate)
  .middleware(Authentication)
  .annotateEndpointsMerge(requiresFeature("deals"))
  .annotateMerge(OpenApi.annotations({ title: "Deals", description: gate }))
{}

export class ContactDealsApi extends HttpApiGroup.make("contactDeals")
  .add(
    HttpApiEndpoint.get("list", "/v1/contacts/:contact/deals", {
      params: { contact: Id },
      query: PageQuery,
      success: Data(Paged(Deal)),
      error: Write
    })
  )
  .middleware(PlanGate)
  .middleware(Authentication)
  .annotateEndpointsMerge(requiresFeature("deals"))
  .annotateMerge(OpenApi.annotations({ title: "Contact deals", description: "A contact's live deals, newest first. " + gate }))
{}

export class DealTasksApi extends HttpApiGroup.make("dealTasks")
  .add(
    HttpApiEndpoint.get("list", "/v1/deal-tasks", {
      query: TaskListQuery,
      success: Data(Paged(Task)),
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Tasks of live deals by due date (undated last). `overdue` (0/1): due before now while open. `mine=1`: " +
        "assigned to the caller (wins over `assigned_user_id`)."
    })),
    HttpApiEndpoint.post("create", "/v1/deal-tasks", {
      payload: CreateTask,
      success: Data(Task).pipe(HttpApiSchema.status(201)),
      error: [...AuthErrors, Unprocessable]
    }),
    HttpApiEndpoint.patch("update", "/v1/deal-tasks/:task", {
      params: { task: Id },
      payload: UpdateTask,
      success: Data(Task),
      error: Write
    }),
    HttpApiEndpoint.delete("delete", "/v1/deal-tasks/:task", { params: { task: Id }, success: Data(Message), error: Read })
  )
  .middleware(PlanGate)
  .middleware(Authentication)
  .annotateEndpointsMerge(requiresFeature("deals"))
  .annotateMerge(OpenApi.annotations({
    title: "Deal tasks",
    description: "Reading needs `deal.view`, writing `deal.update`. done or cancelled sets `completed_at`, reopening clears " +
      "it. A new assignee gets `deal_task.assigned` on `private-user.{id}`, and `deal_task.reminder` at `remind_at`. " + gate
  }))
{}

export class DealSettingsApi extends HttpApiGroup.make("dealSettings")
  .add(
    HttpApiEndpoint.get("get", "/v1/company/deal-settings", { success: Data(DealSettings), error: AuthErrors }),
    HttpApiEndpoint.post("update", "/v1/company/deal-settings", {
      payload: DealSettingsInput,
      success: Data(DealSettings),
      error: [...AuthErrors, Unprocessable]
    })
  )
  .middleware(PlanGate)
  .middleware(Authentication)
  .annotateEndpointsMerge(requiresFeature("deals"))
  .annotateMerge(OpenApi.annotations({
    title: "Deal settings",
    description: "Reading needs `deal.view`, writing `lost_reason.manage`. `default_currency` is answered resolved (KZT when " +
      "unset). Turning on `auto_create_deal_enabled` without a funnel is 422. Title placeholders: `{{contact_name}}`, " +
      "`{{channel_name}}`. " + gate
  }))
{}

/** Every deals group, for `src/Api.ts`. */
export const DealsGroups = [FunnelsApi, DealTypesApi, LostReasonsApi, DealsApi, ContactDealsApi, DealTasksApi, DealSettingsApi] as const

import { Effect, Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { data } from "../platform/Envelope.ts"
import { Deals } from "./Deals.ts"
import { Funnels } from "./Funnels.ts"
import { Settings } from "./Settings.ts"
import { Tasks } from "./Tasks.ts"

const done = (message: string) => <E, R>(effect: Effect.Effect<void, E, R>) => Effect.as(effect, { data: { message } })

const FunnelsHttp = HttpApiBuilder.group(Api, "funnels", Effect.fn(function*(handlers) {
  const funnels = yield* Funnels
  return handlers
    .handle("list", () => data(funnels.list))
    .handle("create", ({ payload }) => data(funnels.create(payload)))
    .handle("get", ({ params }) => data(funnels.get(params.funnel)))
    .handle("update", ({ params, payload }) => data(funnels.update(params.funnel, payload)))
    .handle("delete", ({ params }) => done("Funnel deleted.")(funnels.delete(params.funnel)))
    .handle("addStage", ({ params, payload }) => data(funnels.addStage(params.funnel, payload)))
    .handle("updateStage", ({ params, payload }) => data(funnels.updateStage(params.funnel, params.stage, payload)))
    .handle("deleteStage", ({ params }) => done("Stage deleted.")(funnels.deleteStage(params.funnel, params.stage)))
}))

const DealTypesHttp = HttpApiBuilder.group(Api, "dealTypes", Effect.fn(function*(handlers) {
  const funnels = yield* Funnels
  return handlers
    .handle("list", () => data(funnels.listTypes))
    .handle("create", ({ payload }) => data(funnels.createType(payload)))
    .handle("update", ({ params, payload }) => data(funnels.updateType(params.dealType, payload)))
    .handle("delete", ({ params }) => done("Deal type deleted.")(funnels.deleteType(params.dealType)))
}))

const LostReasonsHttp = HttpApiBuilder.group(Api, "lostReasons", Effect.fn(function*(handlers) {
  const funnels = yield* Funnels
  return handlers
    .handle("list", () => data(funnels.listReasons))
    .handle("create", ({ payload }) => data(funnels.createReason(payload)))
    .handle("update", ({ params, payload }) => data(funnels.updateReason(params.lostReason, payload)))
    .handle("delete", ({ params }) => done("Lost reason deleted.")(funnels.deleteReason(params.lostReason)))
}))

const DealsHandlers = HttpApiBuilder.group(Api, "deals", Effect.fn(function*(handlers) {
  const deals = yield* Deals
  const tasks = yield* Tasks
  return handlers
    .handle("list", ({ query }) => data(deals.list(query)))
    .handle("create", ({ payload }) => data(deals.create(payload)))
    .handle("get", ({ params }) => data(deals.get(params.deal)))
    .handle("update", ({ params, payload }) => data(deals.update(params.deal, payload)))
    .handle("delete", ({ params }) => done("Deal deleted.")(deals.delete(params.deal)))
    .handle("restore", ({ params }) => data(deals.restore(params.deal)))
    .handle("activities", ({ params, query }) => data(deals.activities(params.deal, query)))
    .handle("addNote", ({ params, payload }) =>
      data(Effect.map(deals.addNote(params.deal, payload), (item) => ({ message: "Note added.", item }))))
    .handle("tasks", ({ params }) => data(tasks.forDeal(params.deal)))
}))

const ContactDealsHttp = HttpApiBuilder.group(Api, "contactDeals", Effect.fn(function*(handlers) {
  const deals = yield* Deals
  return handlers.handle("list", ({ params, query }) => data(deals.forContact(params.contact, query)))
}))

const DealTasksHttp = HttpApiBuilder.group(Api, "dealTasks", Effect.fn(function*(handlers) {
  const tasks = yield* Tasks
  return handlers
    .handle("list", ({ query }) => data(tasks.list(query)))
    .handle("create", ({ payload }) => data(tasks.create(payload)))
    .handle("update", ({ params, payload }) => data(tasks.update(params.task, payload)))
    .handle("delete", ({ params }) => done("Task deleted.")(tasks.delete(params.task)))
}))

const DealSettingsHttp = HttpApiBuilder.group(Api, "dealSettings", Effect.fn(function*(handlers) {
  const settings = yield* Settings
  return handlers
    .handle("get", () => data(settings.get))
    .handle("update", ({ payload }) => data(settings.update(payload)))
}))

/** Every deals handler group, for `src/Http.ts`. */
export const DealsHttp = Layer.mergeAll(
  FunnelsHttp,
  DealTypesHttp,
  LostReasonsHttp,
  DealsHandlers,
  ContactDealsHttp,
  DealTasksHttp,
  DealSettingsHttp
).pipe(Layer.provide([Funnels.layer, Deals.layer, Tasks.layer, Settings.layer]))

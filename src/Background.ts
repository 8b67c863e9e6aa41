import { Effect, Layer } from "effect"
import { RemindersLayer } from "./deals/Reminders.ts"
import { CountFoldLayer } from "./conversations/CountFold.ts"
import { SnoozeLayer } from "./conversations/Snooze.ts"
import { Broadcasts } from "./broadcasts/Broadcasts.ts"
import { RunJobHandler, StartJobHandler } from "./broadcasts/Job.ts"
import { ExportExpiryHandler, ExportHandler, type ExportJobServices } from "./exports/Job.ts"
import { ExportsRepo } from "./exports/Repo.ts"
import { WebhookDeliveryLayer } from "./integrations/Delivery.ts"
import { Jobs } from "./platform/Jobs.ts"
import { MailDrainLayer } from "./platform/Mail.ts"
import { DispatcherLayer } from "./realtime/Dispatcher.ts"
import { StickerImportHandler } from "./stickers/Imports.ts"
import { StickersRepo } from "./stickers/Repo.ts"
import { Stickers } from "./stickers/Stickers.ts"
import { RunExecutor, RunHandler } from "./automations/Executor.ts"
import { TriggerIndex } from "./automations/Triggers.ts"
import { AutomationTriggersLayer } from "./automations/TriggerConsumer.ts"
import { AutomationsRepo, TriggerCursorsRepo } from "./automations/Repo.ts"
import { AutomationContextRepo } from "./automations/ContextRepo.ts"
import { Outbound } from "./messages/Outbound.ts"
import { Send } from "./messages/Send.ts"
import { Media } from "./media/Media.ts"
import { Contacts } from "./contacts/Contacts.ts"
import { Deals } from "./deals/Deals.ts"
import { OutboundHttp } from "./platform/OutboundHttp.ts"
import { TemplateSyncHandler } from "./templates/Job.ts"
import { Moderation } from "./templates/Moderation.ts"
import { TemplateSending } from "./templates/Sending.ts"
import { CallOutcomesLayer } from "./telephony/Outcomes.ts"

/** What automation runs act through; one executor serves the job runner and the trigger consumer. */
const AutomationServices = Layer.mergeAll(AutomationsRepo.layer, AutomationContextRepo.layer, Outbound.layer.pipe(Layer.provide(Media.layer)), Media.layer, Contacts.layer, Deals.layer, OutboundHttp.layer, TemplateSending.layer, Send.layer)
const Executor = RunExecutor.layer.pipe(Layer.provide(AutomationServices))

/** Every job kind this process runs; a new kind adds its handler here. */
const JobRunner = Jobs.runner<
  | Effect.Services<typeof StickerImportHandler.make>
  | ExportJobServices
  | Effect.Services<typeof RunHandler.make>
  | Effect.Services<typeof RunJobHandler.make>
  | Effect.Services<typeof StartJobHandler.make>
  | Effect.Services<typeof TemplateSyncHandler.make>
>([StickerImportHandler, ExportHandler, ExportExpiryHandler, RunHandler, RunJobHandler, StartJobHandler, TemplateSyncHandler]).pipe(
  Layer.provide([Stickers.layer, StickersRepo.layer, ExportsRepo.layer, Broadcasts.layer, Moderation.layer]),
  Layer.provide(Executor),
  Layer.provide(AutomationServices)
)

const AutomationTriggers = AutomationTriggersLayer.pipe(
  Layer.provide([TriggerIndex.layer, TriggerCursorsRepo.layer, Executor]),
  Layer.provide(AutomationServices)
)

/**
 * Every worker and consumer of committed events, in one place. Built before the HTTP server
 * listens, so the consumers subscribe before the first request can commit an event.
 */
export const BackgroundLayer = Layer.mergeAll(
  DispatcherLayer,
  JobRunner,
  WebhookDeliveryLayer,
  RemindersLayer,
  SnoozeLayer,
  CountFoldLayer,
  MailDrainLayer,
  AutomationTriggers,
  CallOutcomesLayer
)

import { Effect, Layer } from "effect"
import { RemindersLayer } from "./deals/Reminders.ts"
import { Broadcasts } from "./broadcasts/Broadcasts.ts"
import { RunJobHandler, StartJobHandler } from "./broadcasts/Job.ts"
import { StopWordsLayer } from "./broadcasts/StopWords.ts"
import { ExportExpiryHandler, ExportHandler, type ExportJobServices } from "./exports/Job.ts"
import { ExportsRepo } from "./exports/Repo.ts"
import { WebhookDeliveryLayer } from "./integrations/Delivery.ts"
import { Jobs } from "./platform/Jobs.ts"
import { DispatcherLayer } from "./realtime/Dispatcher.ts"
import { StickerImportHandler } from "./stickers/Imports.ts"
import { StickersRepo } from "./stickers/Repo.ts"
import { Stickers } from "./stickers/Stickers.ts"

/** Every job kind this process runs; a new kind adds its handler here. */
const JobRunner = Jobs.runner<
  | Effect.Services<typeof StickerImportHandler.make>
  | ExportJobServices
  | Effect.Services<typeof RunJobHandler.make>
  | Effect.Services<typeof StartJobHandler.make>
>([StickerImportHandler, ExportHandler, ExportExpiryHandler, RunJobHandler, StartJobHandler]).pipe(
  Layer.provide([Stickers.layer, StickersRepo.layer, ExportsRepo.layer, Broadcasts.layer])
)

/**
 * Every worker and consumer of committed events, in one place. Built before the HTTP server
 * listens, so the consumers subscribe before the first request can commit an event.
 */
export const BackgroundLayer = Layer.mergeAll(DispatcherLayer, JobRunner, WebhookDeliveryLayer, RemindersLayer, StopWordsLayer)

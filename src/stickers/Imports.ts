import { Cause, Context, Effect, Layer, Option, Predicate, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId, CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Channels } from "../channels/Channels.ts"
import type { ChannelContext } from "../providers/Provider.ts"
import { TelegramApi } from "../providers/Telegram.ts"
import { Events } from "../events/Events.ts"
import { BadGateway, type Forbidden, Unprocessable } from "../platform/Errors.ts"
import { jobHandler, jobKind, Jobs, type JobRun } from "../platform/Jobs.ts"
import { type ImportTelegram, isEmoji, maxFilesPerUpload, parseSetLink } from "./Domain.ts"
import { StickersRepo } from "./Repo.ts"
import { Stickers } from "./Stickers.ts"

/** Spec: an imported set keeps at most 120 static stickers. */
export const maxImportedStickers = maxFilesPerUpload

export const importFinishedEvent = "sticker.pack.import.finished"

/** One static sticker of the set, as planned at queue time. */
const ImportItem = Schema.Struct({ file_id: Schema.String, emoji: Schema.NullOr(Schema.String) })
type ImportItem = typeof ImportItem.Type

const ImportPayload = Schema.Struct({
  channel_id: Schema.Int,
  user_id: Schema.NullOr(Schema.Int),
  set_name: Schema.String,
  title: Schema.String,
  items: Schema.Array(ImportItem),
  skipped_animated: Schema.Int,
  truncated: Schema.Boolean
})

/** Checkpointed with every sticker, in the transaction that stores it. */
const ImportProgress = Schema.Struct({
  next_index: Schema.Int,
  imported: Schema.Int,
  failed: Schema.Int,
  pack_id: Schema.NullOr(Schema.Int)
})
type ImportProgress = typeof ImportProgress.Type

/** The lease is renewed with every sticker, so only a runner that died lets it lapse. */
export const StickerImportJob = jobKind("sticker.import", { payload: ImportPayload, progress: ImportProgress, lease: "60 seconds" })

type ImportRun = JobRun<typeof ImportPayload.Type, ImportProgress>

const started: ImportProgress = { next_index: 0, imported: 0, failed: 0, pack_id: null }

const impossible = (error_code: string, message: string) => new Unprocessable({ message, error_code })

const tagsOf = (emoji: string | null) => (emoji !== null && isEmoji(emoji) ? [emoji] : [])

/** Downloads, converts and stores the set's stickers one by one, then announces the outcome. */
export const StickerImportHandler = jobHandler(StickerImportJob, Effect.gen(function*() {
  const repo = yield* StickersRepo
  const stickers = yield* Stickers
  const channels = yield* Channels
  const telegram = yield* TelegramApi
  const events = yield* Events
  const sql = yield* SqlClient.SqlClient

  const download = (channel: ChannelContext, item: ImportItem) =>
    telegram.adapter.download(channel, item.file_id).pipe(
      Effect.retry({ times: 2, schedule: Schedule.exponential("300 millis"), while: (e) => e.code === "unavailable" }),
      Effect.flatMap((file) => stickers.convert(file.bytes))
    )

  /** One sticker: downloaded and converted outside the transaction, stored and checkpointed inside it. */
  const importItem = Effect.fnUntraced(function*(job: ImportRun, channel: ChannelContext, progress: ImportProgress) {
    const companyId = CompanyId.make(job.companyId)
    const { payload } = job
    const item = payload.items[progress.next_index]
    const converted = yield* Effect.option(download(channel, item))
    return yield* Effect.gen(function*() {
      let next: ImportProgress = { ...progress, next_index: progress.next_index + 1, failed: progress.failed + 1 }
      if (Option.isSome(converted)) {
        const pack = progress.pack_id ?? (yield* repo.insertPack(companyId, {
          name: payload.title,
          tray_emoji: payload.items.map((i) => i.emoji).find((e): e is string => e !== null && isEmoji(e)) ?? null,
          source: "telegram",
          source_name: payload.set_name
        })).id
        yield* stickers.store(companyId, pack, {
          converted: converted.value,
          originalName: null,
          emojiTags: tagsOf(item.emoji),
          sourceMessageId: null
        })
        next = { ...progress, next_index: progress.next_index + 1, imported: progress.imported + 1, pack_id: pack }
      }
      // A runner that lost its lease rolls the sticker back and leaves the item to the adopter.
      yield* job.advance(next)
      return next
    }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
  })

  const finish = Effect.fnUntraced(function*(job: ImportRun, progress: ImportProgress, failure: string | null) {
    const outcome = failure === null && progress.imported > 0 ? "success" : "error"
    const error = failure ?? (progress.imported > 0 ? null : "No sticker of the set could be imported.")
    const result = {
      outcome,
      name: job.payload.set_name,
      title: job.payload.title,
      pack_id: progress.pack_id,
      imported: progress.imported,
      skipped_animated: job.payload.skipped_animated,
      truncated: job.payload.truncated,
      failed: progress.failed,
      error
    }
    yield* Effect.gen(function*() {
      yield* job.complete(result)
      yield* events.emit(CompanyId.make(job.companyId), importFinishedEvent, result)
    }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
  })

  return (job: ImportRun) => {
    let progress = Option.getOrElse(job.progress, () => started)
    return Effect.gen(function*() {
      const channel = yield* channels.context(CompanyId.make(job.companyId), job.payload.channel_id)
      if (Option.isNone(channel) || channel.value.status !== "connected" || channel.value.credentials.bot_token === undefined) {
        return yield* finish(job, progress, "The Telegram channel of the import is no longer connected.")
      }
      while (progress.next_index < job.payload.items.length) {
        progress = yield* importItem(job, channel.value, progress)
      }
      yield* finish(job, progress, null)
    }).pipe(
      Effect.catchCause((cause) => {
        const error = Cause.findError(cause)
        const leaseLost = error._tag === "Success" && Predicate.isTagged(error.success, "JobLeaseLost")
        if (Cause.hasInterruptsOnly(cause) || leaseLost) return Effect.failCause(cause)
        return Effect.logError("sticker import failed", cause).pipe(
          Effect.andThen(finish(job, progress, "The import stopped on an internal error."))
        )
      }),
      Effect.annotateLogs({ sticker_import: job.id, company_id: job.companyId })
    )
  }
}))

export class StickerImports extends Context.Service<StickerImports, {
  /**
   * Checks the set synchronously (link, a connected Telegram bot, the set exists and has a
   * static sticker), then queues the job; this runner's job runner starts it at once.
   */
  queue(input: ImportTelegram): Effect.Effect<
    { readonly status: "queued"; readonly name: string; readonly title: string },
    Forbidden | Unprocessable | BadGateway,
    CurrentActor
  >
}>()("crm/stickers/StickerImports") {
  static readonly layerNoDeps = Layer.effect(
    StickerImports,
    Effect.gen(function*() {
      const repo = yield* StickersRepo
      const channels = yield* Channels
      const telegram = yield* TelegramApi
      const jobs = yield* Jobs

      const botChannel = Effect.fnUntraced(function*(companyId: CompanyId) {
        for (const id of yield* repo.telegramChannels(companyId)) {
          const channel = yield* channels.context(companyId, id)
          if (Option.isSome(channel) && channel.value.credentials.bot_token !== undefined) return Option.some(channel.value)
        }
        return Option.none<ChannelContext>()
      })

      const queue = Effect.fn("StickerImports.queue")(function*(input: ImportTelegram) {
        const company = yield* requirePermission("sticker.create")
        const actor = yield* CurrentActor
        const name = parseSetLink(input.link)
        if (name === null) {
          const message = "The link must be a Telegram sticker set link (https://t.me/addstickers/<name>) or a set name."
          return yield* new Unprocessable({ message, errors: { link: [message] }, error_code: "sticker_link_invalid" })
        }
        const channel = yield* botChannel(company.id)
        if (Option.isNone(channel)) {
          return yield* impossible("telegram_bot_unavailable", "No connected Telegram channel with a bot token is available for the import.")
        }
        const set = yield* telegram.getStickerSet(channel.value, name).pipe(
          Effect.catchTag("ProviderError", (e) =>
            e.code === "unavailable"
              ? Effect.fail(new BadGateway({ message: `Telegram is unavailable: ${e.message}` }))
              : Effect.fail(impossible("telegram_bot_unavailable", `Telegram refused the bot: ${e.message}`)))
        )
        if (Option.isNone(set)) return yield* impossible("sticker_set_not_found", `Telegram has no sticker set named ${name}.`)
        const all = set.value.stickers
        if (all.length === 0) return yield* impossible("sticker_set_empty", "The sticker set is empty.")
        const statics = all.filter((s) => !s.is_animated && !s.is_video)
        if (statics.length === 0) {
          return yield* impossible("sticker_set_animated", "The sticker set has only animated or video stickers; only static stickers can be imported.")
        }
        yield* jobs.enqueue(StickerImportJob, company.id, {
          channel_id: channel.value.id,
          user_id: actor.userId,
          set_name: set.value.name,
          title: set.value.title,
          items: statics.slice(0, maxImportedStickers).map((s) => ({ file_id: s.file_id, emoji: s.emoji ?? null })),
          skipped_animated: all.length - statics.length,
          truncated: statics.length > maxImportedStickers
        })
        return { status: "queued" as const, name: set.value.name, title: set.value.title }
      })

      return StickerImports.of({ queue })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(StickersRepo.layer))
}

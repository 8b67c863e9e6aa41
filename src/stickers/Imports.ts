import { Cause, Context, Duration, Effect, FiberSet, Layer, Option, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Channels } from "../channels/Channels.ts"
import type { ChannelContext } from "../providers/Provider.ts"
import { TelegramApi } from "../providers/Telegram.ts"
import { Events } from "../events/Events.ts"
import { BadGateway, type Forbidden, Unprocessable } from "../platform/Errors.ts"
import { type ImportTelegram, isEmoji, maxFilesPerUpload, parseSetLink } from "./Domain.ts"
import { type ImportItem, type ImportJob, ImportRepo, type ItemOutcome } from "./ImportRepo.ts"
import { StickersRepo } from "./Repo.ts"
import { Stickers } from "./Stickers.ts"

/** Spec: an imported set keeps at most 120 static stickers. */
export const maxImportedStickers = maxFilesPerUpload
/** A job's lease; renewed with every sticker, so only a runner that died lets it lapse. */
export const importLeaseSeconds = 60
/** How often a runner looks for jobs to adopt (released at shutdown, or whose runner died). */
export const adoptEvery = Duration.seconds(30)

export const importFinishedEvent = "sticker.pack.import.finished"

const impossible = (error_code: string, message: string) => new Unprocessable({ message, error_code })

const tagsOf = (emoji: string | null) => (emoji !== null && isEmoji(emoji) ? [emoji] : [])

export class StickerImports extends Context.Service<StickerImports, {
  /**
   * Checks the set synchronously (link, a connected Telegram bot, the set exists and has a
   * static sticker), then records the job and starts it on this runner.
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
      const jobs = yield* ImportRepo
      const stickers = yield* Stickers
      const channels = yield* Channels
      const telegram = yield* TelegramApi
      const events = yield* Events
      const sql = yield* SqlClient.SqlClient
      const running = yield* FiberSet.make<void, never>()

      const botChannel = Effect.fnUntraced(function*(companyId: number) {
        for (const id of yield* repo.telegramChannels(companyId)) {
          const channel = yield* channels.context(companyId, id)
          if (Option.isSome(channel) && channel.value.credentials.bot_token !== undefined) return Option.some(channel.value)
        }
        return Option.none<ChannelContext>()
      })

      const download = (channel: ChannelContext, item: ImportItem) =>
        telegram.adapter.download(channel, item.file_id).pipe(
          Effect.retry({ times: 2, schedule: Schedule.exponential("300 millis"), while: (e) => e.code === "unavailable" }),
          Effect.flatMap((file) => stickers.convert(file.bytes))
        )

      /** One sticker: downloaded and converted outside the transaction, stored and counted inside it. */
      const importItem = Effect.fnUntraced(function*(job: ImportJob, channel: ChannelContext, index: number, packId: number | null, owner: string) {
        const item = job.items[index]
        const converted = yield* Effect.option(download(channel, item))
        return yield* Effect.gen(function*() {
          let outcome: ItemOutcome = { imported: false }
          if (Option.isSome(converted)) {
            const pack = packId ?? (yield* repo.insertPack(job.company_id, {
              name: job.title,
              tray_emoji: job.items.map((i) => i.emoji).find((e): e is string => e !== null && isEmoji(e)) ?? null,
              source: "telegram",
              source_name: job.set_name
            })).id
            yield* stickers.store(job.company_id, pack, {
              converted: converted.value,
              originalName: null,
              emojiTags: tagsOf(item.emoji),
              sourceMessageId: null
            })
            outcome = { imported: true, packId: pack }
          }
          const kept = yield* jobs.advance(job.company_id, job.id, owner, index, outcome, importLeaseSeconds)
          // A runner that lost its lease leaves the item to the adopter.
          if (!kept) return yield* Effect.fail("lease lost" as const)
          return outcome
        }).pipe(
          sql.withTransaction,
          Effect.map(Option.some),
          Effect.catch((e) => (e === "lease lost" ? Effect.succeedNone : Effect.die(e)))
        )
      })

      const finish = Effect.fnUntraced(function*(companyId: number, id: number, owner: string, failure: string | null) {
        yield* Effect.gen(function*() {
          const current = yield* jobs.find(companyId, id)
          if (Option.isNone(current)) return
          const job = current.value
          const outcome = failure === null && job.imported > 0 ? "success" : "error"
          const error = failure ?? (job.imported > 0 ? null : "No sticker of the set could be imported.")
          if (!(yield* jobs.finish(companyId, id, owner, outcome, error))) return
          yield* events.emit(companyId, importFinishedEvent, {
            outcome,
            name: job.set_name,
            title: job.title,
            pack_id: job.pack_id,
            imported: job.imported,
            skipped_animated: job.skipped_animated,
            truncated: job.truncated,
            failed: job.failed,
            error
          })
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      const work = Effect.fnUntraced(function*(companyId: number, id: number, owner: string) {
        const found = yield* jobs.find(companyId, id)
        if (Option.isNone(found)) return
        const job = found.value
        const channel = yield* channels.context(companyId, job.channel_id)
        if (Option.isNone(channel) || channel.value.status !== "connected" || channel.value.credentials.bot_token === undefined) {
          return yield* finish(companyId, id, owner, "The Telegram channel of the import is no longer connected.")
        }
        let packId = job.pack_id
        for (let index = job.next_index; index < job.items.length; index++) {
          const outcome = yield* importItem(job, channel.value, index, packId, owner)
          if (Option.isNone(outcome)) return
          if (outcome.value.imported) packId = outcome.value.packId
        }
        yield* finish(companyId, id, owner, null)
      })

      const run = (companyId: number, id: number, owner: string) =>
        work(companyId, id, owner).pipe(
          // At shutdown the job goes back to the queue, for the next runner (or this one restarted).
          Effect.onInterrupt(() => jobs.release(companyId, id, owner)),
          Effect.catchCause((cause) =>
            Cause.hasInterruptsOnly(cause)
              ? Effect.interrupt
              : Effect.logError("sticker import failed", cause).pipe(
                Effect.andThen(finish(companyId, id, owner, "The import stopped on an internal error.")),
                Effect.catchCause(() => Effect.void)
              )
          ),
          Effect.annotateLogs({ sticker_import: id, company_id: companyId })
        )

      const start = (companyId: number, id: number, owner: string) => FiberSet.run(running, run(companyId, id, owner))

      const adopt = Effect.gen(function*() {
        while (true) {
          const owner = randomUUID()
          const claimed = yield* jobs.claimNext(owner, importLeaseSeconds)
          if (Option.isNone(claimed)) return
          yield* start(claimed.value.company_id, claimed.value.id, owner)
        }
      })

      yield* Effect.forkScoped(Effect.forever(
        adopt.pipe(
          Effect.catchCause((cause) => Effect.logWarning("sticker import adoption failed", cause)),
          Effect.andThen(Effect.sleep(adoptEvery))
        )
      ))

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
        const owner = randomUUID()
        const id = yield* jobs.insert(company.id, {
          channel_id: channel.value.id,
          user_id: actor.userId,
          set_name: set.value.name,
          title: set.value.title,
          items: statics.slice(0, maxImportedStickers).map((s) => ({ file_id: s.file_id, emoji: s.emoji ?? null })),
          skipped_animated: all.length - statics.length,
          truncated: statics.length > maxImportedStickers
        }, owner, importLeaseSeconds)
        yield* start(company.id, id, owner)
        return { status: "queued" as const, name: set.value.name, title: set.value.title }
      })

      return StickerImports.of({ queue })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([ImportRepo.layer, StickersRepo.layer]))
}

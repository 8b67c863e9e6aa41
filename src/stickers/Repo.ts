import { Context, Effect, Layer, Option } from "effect"
import type { CompanyId } from "../auth/Domain.ts"
import { SqlClient } from "effect/sql"
import type { PackSource } from "./Domain.ts"

export interface PackRow {
  readonly id: number
  readonly company_id: number
  readonly name: string
  readonly tray_emoji: string | null
  readonly is_system: boolean
  readonly source: PackSource
  readonly position: number
}

export interface StickerRow {
  readonly id: number
  readonly company_id: number
  readonly pack_id: number
  readonly storage_path: string
  readonly width: number
  readonly height: number
  readonly size: number
  readonly is_animated: boolean
  readonly emoji_tags: ReadonlyArray<string>
  readonly position: number
}

export interface NewPack {
  readonly name: string
  readonly tray_emoji: string | null
  readonly source: PackSource
  readonly source_name: string | null
}

export interface NewSticker {
  readonly storage_path: string
  readonly width: number
  readonly height: number
  readonly size: number
  readonly emoji_tags: ReadonlyArray<string>
  readonly original_name: string | null
  readonly source_message_id: number | null
}

export interface PackPatch {
  readonly name?: string | undefined
  readonly tray_emoji?: string | null | undefined
  readonly position?: number | undefined
}

export interface StickerPatch {
  readonly emoji_tags?: ReadonlyArray<string> | undefined
  readonly position?: number | undefined
  readonly pack_id?: number | undefined
}

/** A message a sticker is saved from, and its attachment when the id names one of the message's. */
export interface AttachmentSource {
  readonly channel_id: number
  readonly attachment_id: number | null
  readonly storage_path: string | null
}

/** Sticker packs and stickers of one company; every statement carries the company id. */
export class StickersRepo extends Context.Service<StickersRepo, {
  listPacks(companyId: CompanyId): Effect.Effect<ReadonlyArray<PackRow>>
  findPack(companyId: CompanyId, packId: number): Effect.Effect<Option.Option<PackRow>>
  /** Appended after the company's last pack. */
  insertPack(companyId: CompanyId, pack: NewPack): Effect.Effect<PackRow>
  /** The live system pack, made on first use; concurrent first uses meet on its unique index. */
  systemPack(companyId: CompanyId): Effect.Effect<PackRow>
  updatePack(companyId: CompanyId, packId: number, patch: PackPatch): Effect.Effect<Option.Option<PackRow>>
  /** Soft-deletes the pack and its stickers; false when it is not a live pack of the company. */
  deletePack(companyId: CompanyId, packId: number): Effect.Effect<boolean>
  /** Live stickers of the given packs, in pack order. */
  stickersOf(companyId: CompanyId, packIds: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<StickerRow>>
  /** A live sticker in a live pack. */
  findSticker(companyId: CompanyId, stickerId: number): Effect.Effect<Option.Option<StickerRow>>
  /** Appended after the pack's last sticker. */
  insertSticker(companyId: CompanyId, packId: number, sticker: NewSticker): Effect.Effect<StickerRow>
  updateSticker(companyId: CompanyId, stickerId: number, patch: StickerPatch): Effect.Effect<Option.Option<StickerRow>>
  deleteSticker(companyId: CompanyId, stickerId: number): Effect.Effect<boolean>
  /** A live (not deleted) message of the company, with the attachment when it is that message's. */
  attachmentSource(companyId: CompanyId, messageId: number, attachmentId: number): Effect.Effect<Option.Option<AttachmentSource>>
  /** Connected, live Telegram channels (`msgr_b`) of the company, oldest first. */
  telegramChannels(companyId: CompanyId): Effect.Effect<ReadonlyArray<number>>
}>()("crm/stickers/StickersRepo") {
  static readonly layer = Layer.effect(
    StickersRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const packColumns = sql`id, company_id, name, tray_emoji, is_system, source, position`
      const stickerColumns = sql`id, company_id, pack_id, storage_path, width, height, size, is_animated, emoji_tags, position`

      const listPacks = (companyId: CompanyId) =>
        sql<PackRow>`
          SELECT ${packColumns} FROM sticker_packs
          WHERE company_id = ${companyId} AND deleted_at IS NULL
          ORDER BY position, id`.pipe(Effect.orDie)

      const findPack = (companyId: CompanyId, packId: number) =>
        sql<PackRow>`
          SELECT ${packColumns} FROM sticker_packs
          WHERE company_id = ${companyId} AND id = ${packId} AND deleted_at IS NULL`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const insertPack = (companyId: CompanyId, pack: NewPack) =>
        sql<PackRow>`
          INSERT INTO sticker_packs (company_id, name, tray_emoji, is_system, source, source_name, position)
          VALUES (${companyId}, ${pack.name}, ${pack.tray_emoji}, false, ${pack.source}, ${pack.source_name},
            (SELECT COALESCE(MAX(position) + 1, 0) FROM sticker_packs WHERE company_id = ${companyId} AND deleted_at IS NULL))
          RETURNING ${packColumns}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const systemPack = (companyId: CompanyId) =>
        Effect.gen(function*() {
          yield* sql`
            INSERT INTO sticker_packs (company_id, name, is_system, source, position)
            VALUES (${companyId}, 'Saved stickers', true, 'system',
              (SELECT COALESCE(MAX(position) + 1, 0) FROM sticker_packs WHERE company_id = ${companyId} AND deleted_at IS NULL))
            ON CONFLICT (company_id) WHERE is_system AND deleted_at IS NULL DO NOTHING`
          const rows = yield* sql<PackRow>`
            SELECT ${packColumns} FROM sticker_packs
            WHERE company_id = ${companyId} AND is_system AND deleted_at IS NULL`
          return rows[0]
        }).pipe(Effect.orDie)

      const updatePack = (companyId: CompanyId, packId: number, patch: PackPatch) =>
        sql<PackRow>`
          UPDATE sticker_packs SET
            name = COALESCE(${patch.name ?? null}, name),
            tray_emoji = CASE WHEN ${patch.tray_emoji !== undefined} THEN ${patch.tray_emoji ?? null} ELSE tray_emoji END,
            position = COALESCE(${patch.position ?? null}, position),
            updated_at = now()
          WHERE company_id = ${companyId} AND id = ${packId} AND deleted_at IS NULL
          RETURNING ${packColumns}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const deletePack = (companyId: CompanyId, packId: number) =>
        Effect.gen(function*() {
          const packs = yield* sql<{ id: number }>`
            UPDATE sticker_packs SET deleted_at = now(), updated_at = now()
            WHERE company_id = ${companyId} AND id = ${packId} AND deleted_at IS NULL
            RETURNING id`
          if (packs.length === 0) return false
          yield* sql`
            UPDATE stickers SET deleted_at = now(), updated_at = now()
            WHERE company_id = ${companyId} AND pack_id = ${packId} AND deleted_at IS NULL`
          return true
        }).pipe(sql.withTransaction, Effect.orDie)

      const stickersOf = (companyId: CompanyId, packIds: ReadonlyArray<number>) =>
        packIds.length === 0
          ? Effect.succeed([])
          : sql<StickerRow>`
              SELECT ${stickerColumns} FROM stickers
              WHERE company_id = ${companyId} AND ${sql.in("pack_id", packIds)} AND deleted_at IS NULL
              ORDER BY pack_id, position, id`.pipe(Effect.orDie)

      const findSticker = (companyId: CompanyId, stickerId: number) =>
        sql<StickerRow>`
          SELECT s.id, s.company_id, s.pack_id, s.storage_path, s.width, s.height, s.size, s.is_animated, s.emoji_tags, s.position
          FROM stickers s
          JOIN sticker_packs p ON p.id = s.pack_id AND p.company_id = ${companyId} AND p.deleted_at IS NULL
          WHERE s.company_id = ${companyId} AND s.id = ${stickerId} AND s.deleted_at IS NULL`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const insertSticker = (companyId: CompanyId, packId: number, s: NewSticker) =>
        sql<StickerRow>`
          INSERT INTO stickers (company_id, pack_id, storage_path, width, height, size, emoji_tags, original_name, source_message_id, position)
          VALUES (${companyId}, ${packId}, ${s.storage_path}, ${s.width}, ${s.height}, ${s.size}, ${JSON.stringify(s.emoji_tags)}::jsonb,
            ${s.original_name}, ${s.source_message_id},
            (SELECT COALESCE(MAX(position) + 1, 0) FROM stickers
             WHERE company_id = ${companyId} AND pack_id = ${packId} AND deleted_at IS NULL))
          RETURNING ${stickerColumns}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const updateSticker = (companyId: CompanyId, stickerId: number, patch: StickerPatch) => {
        // A sticker moved without an explicit position goes to the end of its new pack.
        const position = patch.position !== undefined
          ? sql`${patch.position}`
          : patch.pack_id !== undefined
          ? sql`CASE WHEN pack_id = ${patch.pack_id} THEN position ELSE (
              SELECT COALESCE(MAX(position) + 1, 0) FROM stickers
              WHERE company_id = ${companyId} AND pack_id = ${patch.pack_id} AND deleted_at IS NULL) END`
          : sql`position`
        return sql<StickerRow>`
          UPDATE stickers SET
            emoji_tags = COALESCE(${patch.emoji_tags === undefined ? null : JSON.stringify(patch.emoji_tags)}::jsonb, emoji_tags),
            position = ${position},
            pack_id = COALESCE(${patch.pack_id ?? null}, pack_id),
            updated_at = now()
          WHERE company_id = ${companyId} AND id = ${stickerId} AND deleted_at IS NULL
          RETURNING ${stickerColumns}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )
      }

      const deleteSticker = (companyId: CompanyId, stickerId: number) =>
        sql<{ id: number }>`
          UPDATE stickers SET deleted_at = now(), updated_at = now()
          WHERE company_id = ${companyId} AND id = ${stickerId} AND deleted_at IS NULL
          RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const attachmentSource = (companyId: CompanyId, messageId: number, attachmentId: number) =>
        sql<AttachmentSource>`
          SELECT m.channel_id, a.id AS attachment_id, a.storage_path
          FROM messages m
          LEFT JOIN attachments a ON a.company_id = ${companyId} AND a.id = ${attachmentId} AND a.message_id = m.id
          WHERE m.company_id = ${companyId} AND m.id = ${messageId} AND m.deleted_at IS NULL`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const telegramChannels = (companyId: CompanyId) =>
        sql<{ id: number }>`
          SELECT id FROM channels
          WHERE company_id = ${companyId} AND type = 'msgr_b' AND provider = 'telegram'
            AND status = 'connected' AND deleted_at IS NULL
          ORDER BY id`.pipe(
          Effect.map((rows) => rows.map((row) => row.id)),
          Effect.orDie
        )

      return StickersRepo.of({
        listPacks,
        findPack,
        insertPack,
        systemPack,
        updatePack,
        deletePack,
        stickersOf,
        findSticker,
        insertSticker,
        updateSticker,
        deleteSticker,
        attachmentSource,
        telegramChannels
      })
    })
  )
}

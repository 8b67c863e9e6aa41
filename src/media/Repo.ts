import { Context, Effect, Layer, Option } from "effect"
import type { CompanyId } from "../auth/Domain.ts"
import { SqlClient } from "effect/sql"
import type { MediaRow, MediaType } from "./Domain.ts"

/** What the media route needs of an attachment. */
export interface AttachmentFile {
  readonly id: number
  readonly message_id: number
  readonly type: string
  readonly mime_type: string | null
  readonly storage_path: string | null
  readonly file_name: string | null
}

/** A live library sticker as an attachment source. */
export interface StickerSource {
  readonly id: number
  readonly storage_path: string
  readonly mime_type: string
  readonly size: number
}

export class MediaRepo extends Context.Service<MediaRepo, {
  insert(companyId: CompanyId, row: {
    readonly userId: number | null
    readonly type: MediaType
    readonly mimeType: string
    readonly fileName: string | null
    readonly size: number
    readonly storagePath: string
    readonly durationSeconds: number | null
  }): Effect.Effect<MediaRow>
  find(companyId: CompanyId, ids: ReadonlyArray<number>): Effect.Effect<ReadonlyMap<number, MediaRow>>
  stickers(companyId: CompanyId, ids: ReadonlyArray<number>): Effect.Effect<ReadonlyMap<number, StickerSource>>
  attachmentFile(companyId: CompanyId, messageId: number, attachmentId: number): Effect.Effect<Option.Option<AttachmentFile>>
}>()("crm/media/MediaRepo") {
  static readonly layer = Layer.effect(
    MediaRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const columns = sql`id, company_id, type, mime_type, file_name, size::int AS size, storage_path, duration_seconds`

      const insert: MediaRepo["Service"]["insert"] = (companyId, row) =>
        sql<MediaRow>`
          INSERT INTO media (company_id, user_id, type, mime_type, file_name, size, storage_path, duration_seconds)
          VALUES (${companyId}, ${row.userId}, ${row.type}, ${row.mimeType}, ${row.fileName}, ${row.size}, ${row.storagePath}, ${row.durationSeconds})
          RETURNING ${columns}`.pipe(Effect.map((rows) => rows[0]), Effect.orDie)

      const find = (companyId: CompanyId, ids: ReadonlyArray<number>) =>
        ids.length === 0
          ? Effect.succeed(new Map<number, MediaRow>())
          : sql<MediaRow>`SELECT ${columns} FROM media WHERE company_id = ${companyId} AND id IN ${sql.in(ids)}`.pipe(
            Effect.map((rows) => new Map(rows.map((r) => [r.id, r] as const))),
            Effect.orDie
          )

      const stickers = (companyId: CompanyId, ids: ReadonlyArray<number>) =>
        ids.length === 0
          ? Effect.succeed(new Map<number, StickerSource>())
          : sql<StickerSource>`
              SELECT s.id, s.storage_path, s.mime_type, s.size
              FROM stickers s JOIN sticker_packs p ON p.id = s.pack_id AND p.company_id = s.company_id
              WHERE s.company_id = ${companyId} AND s.id IN ${sql.in(ids)} AND s.deleted_at IS NULL AND p.deleted_at IS NULL`.pipe(
              Effect.map((rows) => new Map(rows.map((r) => [r.id, r] as const))),
              Effect.orDie
            )

      const attachmentFile = (companyId: CompanyId, messageId: number, attachmentId: number) =>
        sql<AttachmentFile>`
          SELECT id, message_id, type, mime_type, storage_path, file_name FROM attachments
          WHERE company_id = ${companyId} AND message_id = ${messageId} AND id = ${attachmentId}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      return MediaRepo.of({ insert, find, stickers, attachmentFile })
    })
  )
}

import { Context, Effect, Layer, Option, Stream } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import { AppConfig } from "../platform/Config.ts"
import type { Condition, GroupLogic } from "../segments/Domain.ts"
import type { ExportFilters, ExportFormat, ExportStatus, ExportType } from "./Domain.ts"
import type { Cell } from "./Writers.ts"

export interface ExportRow {
  readonly id: number
  readonly uuid: string
  readonly company_id: number
  readonly user_id: number | null
  readonly type: ExportType
  readonly format: ExportFormat
  readonly name: string
  readonly status: ExportStatus
  readonly filters: ExportFilters
  readonly row_count: number
  readonly file_size: number | string | null
  readonly file_path: string | null
  readonly error_message: string | null
  readonly expires_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
}

export interface SegmentRow {
  readonly id: number
  readonly type: "dynamic" | "static"
  readonly group_logic: GroupLogic
  readonly conditions: ReadonlyArray<Condition>
}

/** What a batch query may narrow by, resolved from the export's filters. */
export interface Scope {
  readonly accountType?: string
  /** Contact ids (a compiled segment statement). */
  readonly members?: Statement.Fragment
  readonly from?: Date
  /** Exclusive upper bound. */
  readonly until?: Date
  readonly channelId?: number
  readonly direction?: string
  readonly conversationId?: number
  readonly groupChatId?: number
}

/** How a writer takes its rows: as cells, or as CSV records the database already wrote. */
export type BatchShape = "rows" | "csv"

/** One page of an export's rows, with the keyset cursor to continue after. */
export type Batch =
  & { readonly count: number; readonly last: number }
  & (
    | { readonly shape: "rows"; readonly rows: ReadonlyArray<ReadonlyArray<Cell>> }
    /** The records, joined into pieces of at most about `csvPiece` characters. */
    | { readonly shape: "csv"; readonly csv: ReadonlyArray<string> }
  )

/** Rows per batch handed to a writer (and per keyset page): memory holds one, whatever the export's size. */
export const pageSize = 1000

/** How the database writes a column as CSV. */
type Kind = "int" | "text" | "time"

const contactFields: ReadonlyArray<readonly [string, Kind]> = [
  ["id", "int"], ["display_name", "text"], ["first_name", "text"], ["last_name", "text"], ["company_name", "text"],
  ["status", "text"], ["phones", "text"], ["emails", "text"], ["tags", "text"], ["accounts", "text"], ["custom_fields", "text"],
  ["blocked_at", "time"], ["blocked_reason", "text"], ["opted_out_at", "time"], ["created_at", "time"], ["updated_at", "time"]
]

const messageFields: ReadonlyArray<readonly [string, Kind]> = [
  ["id", "int"], ["timestamp", "time"], ["direction", "text"], ["message_type", "text"], ["message_content", "text"],
  ["status", "text"], ["conversation_id", "int"], ["conversation_name", "text"], ["contact_id", "int"], ["contact_name", "text"],
  ["channel_id", "int"], ["channel_name", "text"], ["channel_type", "text"], ["group_chat_id", "int"], ["sender_user_id", "int"],
  ["created_at", "time"]
]

export const contactColumns: ReadonlyArray<string> = contactFields.map(([name]) => name)
export const messageColumns: ReadonlyArray<string> = messageFields.map(([name]) => name)

/**
 * One CSV record per row of `r`, written by the database: C code does per cell what JS does with
 * several allocations, and the client decodes one text value per row. `quote_ident` is RFC 4180
 * quoting (double quotes, inner ones doubled), applied unless a cell is only `[a-z0-9_]`; a cell
 * starting with `=`, `+`, `-` or `@` first gets a leading `'` (formula injection). Times are ISO
 * 8601 UTC with milliseconds, truncated, as the driver's `Date` and `toISOString` give them.
 */
const csvRecord = (fields: ReadonlyArray<readonly [string, Kind]>) => {
  const cells = fields.map(([name, kind]) => {
    const col = `r."${name}"`
    return kind === "int"
      ? col
      : kind === "time"
      ? `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
      : `quote_ident(CASE WHEN ascii(${col}) IN (61, 43, 45, 64) THEN '''' || ${col} ELSE ${col} END)`
  })
  return `concat(${cells.join(", ',', ")}, E'\\r\\n')`
}
const contactRecord = csvRecord(contactFields)
const messageRecord = csvRecord(messageFields)

const cell = (value: unknown): Cell =>
  value === null || value === undefined
    ? null
    : value instanceof Date
    ? value.toISOString()
    : typeof value === "string" || typeof value === "number" || typeof value === "boolean"
    ? value
    : typeof value === "bigint"
    ? Number(value)
    : JSON.stringify(value)

const toBatch = (columns: ReadonlyArray<string>) => (rows: ReadonlyArray<Record<string, unknown>>): Batch => ({
  shape: "rows",
  rows: rows.map((row) => columns.map((c) => cell(row[c]))),
  count: rows.length,
  last: rows.length === 0 ? 0 : Number(rows[rows.length - 1].id)
})

/**
 * Small enough that V8 allocates each piece among the young objects, which die cheaply: a string
 * of a whole batch (hundreds of KB) goes to the large-object space, which only a full collection
 * frees, and the heap grows by one per batch until then.
 */
const csvPiece = 32_768

const toCsvBatch = (rows: ReadonlyArray<Record<string, unknown>>): Batch => {
  const csv: Array<string> = []
  let piece = ""
  for (const row of rows) {
    piece += row.record as string
    if (piece.length >= csvPiece) {
      csv.push(piece)
      piece = ""
    }
  }
  if (piece !== "") csv.push(piece)
  return { shape: "csv", csv, count: rows.length, last: rows.length === 0 ? 0 : Number(rows[rows.length - 1].id) }
}

/** bigint columns arrive as text; events and the dispatcher need numbers (`user_id` routes to the private channel). */
const normal = (row: ExportRow): ExportRow => ({
  ...row,
  id: Number(row.id),
  company_id: Number(row.company_id),
  user_id: row.user_id === null ? null : Number(row.user_id),
  file_size: row.file_size === null ? null : Number(row.file_size)
})

const columns = (sql: SqlClient.SqlClient) =>
  sql`id, uuid::text AS uuid, company_id, user_id, type, format, name, status, filters, row_count, file_size, file_path,
    error_message, expires_at, created_at, updated_at`

/** Exports of one company and the rows they export; every statement carries the company id. */
export class ExportsRepo extends Context.Service<ExportsRepo, {
  page(companyId: CompanyId, page: number, perPage: number): Effect.Effect<{ rows: ReadonlyArray<ExportRow>; total: number }>
  find(companyId: CompanyId, id: number): Effect.Effect<Option.Option<ExportRow>>
  /** Serialises the creations of one company (the daily limits), until the transaction ends. */
  lockCompany(companyId: CompanyId): Effect.Effect<void>
  countSince(companyId: CompanyId, since: Date): Effect.Effect<{ all: number; messages: number }>
  insert(companyId: CompanyId, input: {
    readonly uuid: string
    readonly userId: number
    readonly type: ExportType
    readonly format: ExportFormat
    readonly name: string
    readonly filters: ExportFilters
    readonly now: Date
  }): Effect.Effect<number>
  /** Marks the export deleted; its file path (if any) for the caller to remove. None when it is not there. */
  softDelete(companyId: CompanyId, id: number): Effect.Effect<Option.Option<string | null>>
  /** pending (or processing, after a restart) → processing; false when the export is gone or finished. */
  start(companyId: CompanyId, id: number, now: Date): Effect.Effect<boolean>
  setRowCount(companyId: CompanyId, id: number, rows: number): Effect.Effect<void>
  complete(companyId: CompanyId, id: number, done: {
    readonly rows: number
    readonly size: number
    readonly path: string
    readonly expiresAt: Date
    readonly now: Date
  }): Effect.Effect<boolean>
  fail(companyId: CompanyId, id: number, message: string): Effect.Effect<boolean>
  /** completed and past `expires_at` → expired; the path of the file to remove. */
  expire(companyId: CompanyId, id: number, now: Date): Effect.Effect<Option.Option<string | null>>
  segments(companyId: CompanyId, ids: ReadonlyArray<number>): Effect.Effect<ReadonlyArray<SegmentRow>>
  /** Which of `ids` exist in the company's `table` (channels, conversations, group threads). */
  existing(companyId: CompanyId, what: "channel" | "conversation" | "group_chat", id: number): Effect.Effect<boolean>
  /**
   * Every row of an export in id order, as batches shaped as `shape`. On a PostgreSQL server this
   * is one statement streamed on a connection of its own (planned like `COPY` of the same
   * SELECT, read as fast as the file is written); embedded PGlite has one connection, which the
   * export must share with its own progress writes: there it is keyset pages of `pageSize`.
   */
  batches(companyId: CompanyId, type: ExportType, scope: Scope, shape: BatchShape): Stream.Stream<Batch>
}>()("crm/exports/ExportsRepo") {
  static readonly layer = Layer.effect(
    ExportsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const streamed = Option.isSome((yield* AppConfig).databaseUrl)
      const cols = columns(sql)
      const live = (companyId: CompanyId) => sql`company_id = ${companyId} AND deleted_at IS NULL`

      const page = (companyId: CompanyId, page: number, perPage: number) =>
        Effect.gen(function*() {
          const rows = yield* sql<ExportRow>`
            SELECT ${cols} FROM exports WHERE ${live(companyId)} ORDER BY id DESC LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`
          const counted = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM exports WHERE ${live(companyId)}`
          return { rows: rows.map(normal), total: counted[0].n }
        }).pipe(Effect.orDie)

      const find = (companyId: CompanyId, id: number) =>
        sql<ExportRow>`SELECT ${cols} FROM exports WHERE ${live(companyId)} AND id = ${id}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), normal)),
          Effect.orDie
        )

      const lockCompany = (companyId: CompanyId) =>
        sql`SELECT pg_advisory_xact_lock(hashtext('exports'), ${companyId}::int)`.pipe(Effect.asVoid, Effect.orDie)

      const countSince = (companyId: CompanyId, since: Date) =>
        sql<{ all: number; messages: number }>`
          SELECT count(*)::int AS all, (count(*) FILTER (WHERE type = 'messages'))::int AS messages
          FROM exports WHERE company_id = ${companyId} AND created_at >= ${since}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        )

      const insert = (companyId: CompanyId, input: Parameters<ExportsRepo["Service"]["insert"]>[1]) =>
        sql<{ id: number }>`
          INSERT INTO exports (uuid, company_id, user_id, type, format, name, filters, created_at, updated_at)
          VALUES (${input.uuid}, ${companyId}, ${input.userId}, ${input.type}, ${input.format}, ${input.name},
            ${JSON.stringify(input.filters)}::jsonb, ${input.now}, ${input.now})
          RETURNING id`.pipe(Effect.map((rows) => Number(rows[0].id)), Effect.orDie)

      const softDelete = (companyId: CompanyId, id: number) =>
        sql<{ file_path: string | null }>`
          UPDATE exports SET deleted_at = now(), updated_at = now(), file_path = NULL
          WHERE ${live(companyId)} AND id = ${id}
          RETURNING (SELECT file_path FROM exports WHERE company_id = ${companyId} AND id = ${id}) AS file_path`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => row.file_path)),
          Effect.orDie
        )

      const start = (companyId: CompanyId, id: number, now: Date) =>
        sql`
          UPDATE exports SET status = 'processing', row_count = 0, started_at = ${now}, updated_at = ${now}
          WHERE ${live(companyId)} AND id = ${id} AND status IN ('pending', 'processing') RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const setRowCount = (companyId: CompanyId, id: number, rows: number) =>
        sql`UPDATE exports SET row_count = ${rows}, updated_at = now() WHERE ${live(companyId)} AND id = ${id}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )

      const complete = (companyId: CompanyId, id: number, done: Parameters<ExportsRepo["Service"]["complete"]>[2]) =>
        sql`
          UPDATE exports SET status = 'completed', row_count = ${done.rows}, file_size = ${done.size}, file_path = ${done.path},
            expires_at = ${done.expiresAt}, completed_at = ${done.now}, error_message = NULL, updated_at = ${done.now}
          WHERE ${live(companyId)} AND id = ${id} AND status = 'processing' RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const fail = (companyId: CompanyId, id: number, message: string) =>
        sql`
          UPDATE exports SET status = 'failed', error_message = ${message}, updated_at = now()
          WHERE ${live(companyId)} AND id = ${id} AND status IN ('pending', 'processing') RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const expire = (companyId: CompanyId, id: number, now: Date) =>
        sql<{ file_path: string | null }>`
          UPDATE exports SET status = 'expired', file_path = NULL, updated_at = now()
          WHERE company_id = ${companyId} AND id = ${id} AND status = 'completed' AND expires_at <= ${now}
          RETURNING (SELECT file_path FROM exports WHERE company_id = ${companyId} AND id = ${id}) AS file_path`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => row.file_path)),
          Effect.orDie
        )

      const segments = (companyId: CompanyId, ids: ReadonlyArray<number>) =>
        ids.length === 0
          ? Effect.succeed([])
          : sql<SegmentRow>`
              SELECT id, type, group_logic, conditions FROM segments WHERE company_id = ${companyId} AND id IN ${sql.in(ids)}
              ORDER BY id`.pipe(Effect.orDie)

      const existing = (companyId: CompanyId, what: "channel" | "conversation" | "group_chat", id: number) =>
        (what === "channel"
          ? sql`SELECT 1 FROM channels WHERE company_id = ${companyId} AND id = ${id} AND deleted_at IS NULL`
          : what === "conversation"
          ? sql`SELECT 1 FROM conversations WHERE company_id = ${companyId} AND id = ${id}`
          : sql`SELECT 1 FROM threads WHERE company_id = ${companyId} AND id = ${id} AND is_group`).pipe(
            Effect.map((rows) => rows.length > 0),
            Effect.orDie
          )


      const contacts = (companyId: CompanyId, scope: Scope, after: number, limit: Statement.Fragment) =>
        sql`
          SELECT c.id, c.display_name, c.first_name, c.last_name, c.company_name, c.status,
            (SELECT string_agg(p.phone, '; ' ORDER BY p.position, p.id) FROM contact_phones p
             WHERE p.company_id = ${companyId} AND p.contact_id = c.id) AS phones,
            (SELECT string_agg(e.email, '; ' ORDER BY e.position, e.id) FROM contact_emails e
             WHERE e.company_id = ${companyId} AND e.contact_id = c.id) AS emails,
            (SELECT string_agg(t.name, '; ' ORDER BY lower(t.name), t.id) FROM contact_tags ct JOIN tags t ON t.id = ct.tag_id
             WHERE ct.company_id = ${companyId} AND ct.contact_id = c.id) AS tags,
            (SELECT string_agg(a.channel_type || ':' || a.external_id, '; ' ORDER BY a.id) FROM contact_accounts a
             WHERE a.company_id = ${companyId} AND a.contact_id = c.id) AS accounts,
            c.custom_fields::text AS custom_fields, c.blocked_at, c.blocked_reason, c.opted_out_at, c.created_at, c.updated_at
          FROM contacts c
          WHERE c.company_id = ${companyId} AND c.deleted_at IS NULL AND c.id > ${after}
            ${scope.accountType === undefined ? sql`` : sql`AND EXISTS (SELECT 1 FROM contact_accounts a
              WHERE a.company_id = ${companyId} AND a.contact_id = c.id AND a.channel_type = ${scope.accountType})`}
            ${scope.members === undefined ? sql`` : sql`AND c.id IN (${scope.members})`}
          ORDER BY c.id
          ${limit}`

      const name = (alias: string) =>
        sql.literal(`coalesce(nullif(${alias}.display_name, ''), nullif(concat_ws(' ', ${alias}.first_name, ${alias}.last_name), ''))`)

      const messages = (companyId: CompanyId, scope: Scope, after: number, limit: Statement.Fragment) =>
        sql`
          SELECT m.id, m."timestamp", m.direction, m.message_type, m.message_content, m.status, m.conversation_id,
            ${name("ct")} AS conversation_name, ct.id AS contact_id, ${name("ct")} AS contact_name,
            m.channel_id, ch.name AS channel_name, ch.type AS channel_type,
            CASE WHEN t.is_group THEN t.id END AS group_chat_id, m.sender_user_id, m.created_at
          FROM messages m
          JOIN conversations cv ON cv.id = m.conversation_id
          JOIN contacts ct ON ct.id = cv.contact_id
          JOIN channels ch ON ch.id = m.channel_id
          JOIN threads t ON t.id = m.thread_id
          WHERE m.company_id = ${companyId} AND m.deleted_at IS NULL AND m.id > ${after}
            ${scope.from === undefined ? sql`` : sql`AND m."timestamp" >= ${scope.from}`}
            ${scope.until === undefined ? sql`` : sql`AND m."timestamp" < ${scope.until}`}
            ${scope.channelId === undefined ? sql`` : sql`AND m.channel_id = ${scope.channelId}`}
            ${scope.direction === undefined ? sql`` : sql`AND m.direction = ${scope.direction}`}
            ${scope.conversationId === undefined ? sql`` : sql`AND m.conversation_id = ${scope.conversationId}`}
            ${scope.groupChatId === undefined ? sql`` : sql`AND m.thread_id = ${scope.groupChatId}`}
          ORDER BY m.id
          ${limit}`

      /** The export's SELECT from `after` on (all of it without `limit`), shaped: CSV records are `[record, id]` rows. */
      const statement = (companyId: CompanyId, type: ExportType, scope: Scope, shape: BatchShape, after: number, limit: Statement.Fragment) => {
        const rows = type === "messages" ? messages(companyId, scope, after, limit) : contacts(companyId, scope, after, limit)
        if (shape === "rows") return sql<Record<string, unknown>>`${rows}`
        const record = type === "messages" ? messageRecord : contactRecord
        return sql<Record<string, unknown>>`SELECT ${sql.literal(record)} AS record, r.id FROM (${rows}) r ORDER BY r.id`
      }
      const toShape = (type: ExportType, shape: BatchShape) =>
        shape === "rows" ? toBatch(type === "messages" ? messageColumns : contactColumns) : toCsvBatch

      const batches = (companyId: CompanyId, type: ExportType, scope: Scope, shape: BatchShape): Stream.Stream<Batch> => {
        const batch = toShape(type, shape)
        if (streamed) {
          // As the rows arrive (a socket read's worth): they die young, before the garbage collector promotes them.
          return statement(companyId, type, scope, shape, 0, sql``).stream.pipe(
            Stream.chunks,
            Stream.map(batch),
            Stream.orDie
          )
        }
        // Segment members are a statement of their own per export: not worth a prepared statement.
        const page = (after: number) => statement(companyId, type, scope, shape, after, sql`LIMIT ${pageSize}`).unprepared
        return Stream.paginate(0, (after: number) =>
          page(after).pipe(
            Effect.map((rows) => {
              const next = batch(rows)
              return [next.count === 0 ? [] : [next], next.count < pageSize ? Option.none<number>() : Option.some(next.last)] as const
            }),
            Effect.orDie
          ))
      }

      return ExportsRepo.of({
        page,
        find,
        lockCompany,
        countSince,
        insert,
        softDelete,
        start,
        setRowCount,
        complete,
        fail,
        expire,
        segments,
        existing,
        batches
      })
    })
  )
}

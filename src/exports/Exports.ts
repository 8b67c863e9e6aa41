import { Clock, Context, Effect, Layer, Option } from "effect"
import type { HttpServerResponse } from "effect/http"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { CompanyId, type CurrentActor, CurrentActor as Actor, requireFeature, requirePermission } from "../auth/Domain.ts"
import { type FeatureNotAvailable, type Forbidden, invalidField, invalidFields, type NotFound, notFound, type Unprocessable, orNotFound } from "../platform/Errors.ts"
import { BlobStore } from "../platform/files/BlobStore.ts"
import { fileResponse } from "../platform/files/FileResponse.ts"
import { SignedUrls } from "../platform/files/SignedUrls.ts"
import { Jobs } from "../platform/Jobs.ts"
import { pageInfo } from "../platform/Pagination.ts"
import { dailyLimit, dailyMessagesLimit, type Export, type ExportFilters, type ExportInput } from "./Domain.ts"
import { ExportJob, lowerBound, segmentIdOf, segmentIdsOf, upperBound } from "./Job.ts"
import { type ExportRow, ExportsRepo } from "./Repo.ts"
import { mimeTypes } from "./Writers.ts"

const exportNotFound = () => notFound("Export not found.")
const fileNotFound = () => notFound("The export file is not available.")

export const exportFilePath = (id: number) => `/v1/exports/${id}/file`

const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

const dateValue = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?$/
const validDate = (value: string) => dateValue.test(value) && !Number.isNaN(lowerBound(value).getTime())

/** Completed and past `expires_at`: shown `expired` before the sweep gets to it. */
const effectiveStatus = (row: ExportRow, now: Date) =>
  row.status === "completed" && row.expires_at !== null && row.expires_at.getTime() <= now.getTime() ? "expired" : row.status

const downloadable = (row: ExportRow, now: Date) => effectiveStatus(row, now) === "completed" && row.file_path !== null

const typeTitles = { contacts: "Contacts", messages: "Messages", segments: "Segments" } as const

type GateErrors = Forbidden | FeatureNotAvailable

export class Exports extends Context.Service<Exports, {
  list(page: number, perPage: number): Effect.Effect<
    { items: ReadonlyArray<Export>; pagination: ReturnType<typeof pageInfo> },
    GateErrors,
    CurrentActor
  >
  get(id: number): Effect.Effect<Export, GateErrors | NotFound, CurrentActor>
  create(input: ExportInput): Effect.Effect<Export, GateErrors | Unprocessable, CurrentActor>
  download(id: number): Effect.Effect<HttpServerResponse.HttpServerResponse, GateErrors | NotFound, CurrentActor>
  delete(id: number): Effect.Effect<void, GateErrors | NotFound, CurrentActor>
  /** The file behind a signed link (the caller has checked the signature, which covers the company). */
  signedFile(companyId: CompanyId, id: number): Effect.Effect<HttpServerResponse.HttpServerResponse, NotFound>
}>()("crm/exports/Exports") {
  static readonly layerNoDeps = Layer.effect(
    Exports,
    Effect.gen(function*() {
      const repo = yield* ExportsRepo
      const store = yield* BlobStore
      const signed = yield* SignedUrls
      const jobs = yield* Jobs
      const sql = yield* SqlClient.SqlClient

      const toExport = (row: ExportRow, now: Date): Export => {
        const status = effectiveStatus(row, now)
        return {
          id: Number(row.id),
          uuid: row.uuid,
          type: row.type,
          name: row.name,
          format: row.format,
          status,
          filters: row.filters as Record<string, unknown>,
          row_count: row.row_count,
          file_size: row.file_size === null ? null : Number(row.file_size),
          error_message: row.error_message,
          download_url: status === "completed" && row.expires_at !== null
            ? signed.sign(exportFilePath(Number(row.id)), {
              params: { c: String(row.company_id) },
              expiresAt: row.expires_at.getTime() / 1000
            })
            : null,
          expires_at: row.expires_at?.toISOString() ?? null,
          created_at: row.created_at.toISOString(),
          updated_at: row.updated_at.toISOString()
        }
      }

      /** Feature first (403 `feature_not_available` on every route), then the permission. */
      const gate = (permission: string) => Effect.andThen(requireFeature("exports"), requirePermission(permission))

      const list = Effect.fn("Exports.list")(function*(page: number, perPage: number) {
        const company = yield* gate("export.view")
        const { rows, total } = yield* repo.page(company.id, page, perPage)
        const now = yield* nowDate
        return { items: rows.map((row) => toExport(row, now)), pagination: pageInfo(page, perPage, total) }
      })

      const get = Effect.fn("Exports.get")(function*(id: number) {
        const company = yield* gate("export.view")
        const row = yield* repo.find(company.id, id)
        if (Option.isNone(row)) return yield* exportNotFound()
        return toExport(row.value, yield* nowDate)
      })

      const checkFilters = Effect.fnUntraced(function*(companyId: CompanyId, input: ExportInput, filters: ExportFilters) {
        const errors: Record<string, Array<string>> = {}
        const add = (field: string, message: string) => (errors[`filters.${field}`] ??= []).push(message)
        if (filters.segment_id !== undefined) {
          const id = segmentIdOf(filters.segment_id)
          if (id === null || (yield* repo.segments(companyId, [id])).length === 0) add("segment_id", "The selected segment id is invalid.")
        }
        if (filters.segment_ids !== undefined) {
          const ids = filters.segment_ids.map(segmentIdOf)
          const known = ids.filter((id): id is number => id !== null)
          const found = new Set((yield* repo.segments(companyId, known)).map((s) => Number(s.id)))
          if (ids.some((id) => id === null || !found.has(id))) add("segment_ids", "The selected segment ids are invalid.")
        }
        if (input.type === "segments" && segmentIdsOf(filters).length === 0) {
          add("segment_id", "The filters.segment_id or filters.segment_ids field is required when type is segments.")
        }
        for (const [field, what] of [["channel_id", "channel"], ["conversation_id", "conversation"], ["group_chat_id", "group_chat"]] as const) {
          const id = filters[field]
          if (id !== undefined && !(yield* repo.existing(companyId, what, id))) add(field, `The selected ${field.replace("_", " ")} is invalid.`)
        }
        const dates = (["date_from", "date_to"] as const).filter((field) => {
          const value = filters[field]
          if (value === undefined) return false
          if (validDate(value)) return true
          add(field, `The filters.${field} field must be a valid date.`)
          return false
        })
        if (dates.length === 2 && lowerBound(filters.date_from!).getTime() >= upperBound(filters.date_to!).getTime()) {
          add("date_to", "The filters.date_to field must be a date after or equal to filters.date_from.")
        }
        if (Object.keys(errors).length > 0) return yield* invalidFields(errors)
      })

      const create = Effect.fn("Exports.create")(function*(input: ExportInput) {
        const company = yield* gate("export.create")
        const actor = yield* Actor
        const filters: ExportFilters = input.filters ?? {}
        yield* checkFilters(company.id, input, filters)
        const now = yield* nowDate
        const name = input.name?.trim() || `${typeTitles[input.type]} export ${now.toISOString().slice(0, 10)}`
        const id = yield* Effect.gen(function*() {
          yield* repo.lockCompany(company.id)
          const since = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()))
          const today = yield* repo.countSince(company.id, since)
          if (today.all >= dailyLimit) {
            return yield* invalidField("type", `The daily limit of ${dailyLimit} exports has been reached.`)
          }
          if (input.type === "messages" && today.messages >= dailyMessagesLimit) {
            return yield* invalidField("type", `The daily limit of ${dailyMessagesLimit} messages exports has been reached.`)
          }
          const id = yield* repo.insert(company.id, { uuid: randomUUID(), userId: actor.userId, type: input.type, format: input.format, name, filters, now })
          yield* jobs.enqueue(ExportJob, company.id, { export_id: id })
          return id
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))
        return toExport(yield* orNotFound(yield* repo.find(company.id, id)), now)
      })

      const fileOf = (row: ExportRow) =>
        fileResponse(store, row.file_path!, {
          mimeType: mimeTypes[row.format],
          fileName: `${row.name.replace(/[/\\]/g, "_")}.${row.format}`,
          cacheControl: "private, no-store"
        })

      const download = Effect.fn("Exports.download")(function*(id: number) {
        const company = yield* gate("export.view")
        const row = yield* repo.find(company.id, id)
        if (Option.isNone(row)) return yield* exportNotFound()
        if (!downloadable(row.value, yield* nowDate)) return yield* fileNotFound()
        return yield* fileOf(row.value)
      })

      const signedFile = Effect.fn("Exports.signedFile")(function*(companyId: CompanyId, id: number) {
        const row = yield* repo.find(companyId, id)
        if (Option.isNone(row) || !downloadable(row.value, yield* nowDate)) return yield* fileNotFound()
        return yield* fileOf(row.value)
      })

      // No `export.delete` in the permission catalog: who may create exports may delete them.
      const remove = Effect.fn("Exports.delete")(function*(id: number) {
        const company = yield* gate("export.create")
        const path = yield* repo.softDelete(company.id, id)
        if (Option.isNone(path)) return yield* exportNotFound()
        if (path.value !== null) yield* store.remove(path.value).pipe(Effect.orDie)
      })

      return Exports.of({ list, get, create, download, delete: remove, signedFile })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(ExportsRepo.layer))
}


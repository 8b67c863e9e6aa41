import { Cause, Clock, DateTime, Duration, Effect, Option, Predicate, Schema, Stream } from "effect"
import { SqlClient } from "effect/sql"
import { randomUUID } from "node:crypto"
import { mkdir, readdir, rm, stat } from "node:fs/promises"
import { dirname, join } from "node:path"
import { CompanyId } from "../auth/Domain.ts"
import { Events } from "../events/Events.ts"
import { BlobStore } from "../platform/files/BlobStore.ts"
import { type JobGaveUp, jobHandler, jobKind, Jobs, type JobRun } from "../platform/Jobs.ts"
import { definitionOf, memberIds } from "../segments/Compiler.ts"
import { type ExportFilters, type ExportType, retentionDays } from "./Domain.ts"
import { contactColumns, type ExportRow, ExportsRepo, messageColumns, type Scope } from "./Repo.ts"
import { fileWriter, type FileWriter } from "./Writers.ts"

const ExportPayload = Schema.Struct({ export_id: Schema.Int })
type ExportPayload = typeof ExportPayload.Type

/**
 * One export written to its file. The lease is renewed with every progress report (at least once
 * a batch plus a second), so only a dead runner lets it lapse; the adopter starts the file over.
 */
export const ExportJob = jobKind("export.run", { payload: ExportPayload, concurrency: 2, lease: "60 seconds", maxAttempts: 3 })

/** Removes a completed export's file once `expires_at` has passed. */
export const ExportExpiryJob = jobKind("export.expire", { payload: ExportPayload, concurrency: 4 })

export const exportCompletedEvent = "export.completed"
export const exportFailedEvent = "export.failed"
export const exportProgressEvent = "export.progress"

const progressEvery = Duration.seconds(1)

const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

const dayStart = (date: string) => new Date(`${date}T00:00:00.000Z`)
const dateOnly = /^\d{4}-\d{2}-\d{2}$/

/** `date_from` as the first instant it covers; a bare date is its UTC midnight. */
export const lowerBound = (value: string) => (dateOnly.test(value) ? dayStart(value) : new Date(value))
/** `date_to` as the first instant after it; a bare date covers its whole UTC day. */
export const upperBound = (value: string) =>
  dateOnly.test(value) ? new Date(dayStart(value).getTime() + 86_400_000) : new Date(new Date(value).getTime() + 1)

/** A segment reference as an id, or null when it cannot be one. */
export const segmentIdOf = (ref: number | string) => {
  const id = typeof ref === "number" ? ref : /^[1-9]\d{0,15}$/.test(ref) ? Number(ref) : null
  return id !== null && Number.isSafeInteger(id) ? id : null
}

export const segmentIdsOf = (filters: ExportFilters) => [
  ...new Set([...(filters.segment_id === undefined ? [] : [filters.segment_id]), ...(filters.segment_ids ?? [])]
    .map(segmentIdOf)
    .filter((id): id is number => id !== null))
]

/**
 * Writes every row of an export to `writer`, batch by batch in the shape the writer takes, and
 * finishes the file; `afterPage` runs after each batch with the rows written so far. The row count.
 */
export const writeRows = <E, R>(
  repo: ExportsRepo["Service"],
  companyId: CompanyId,
  type: ExportType,
  scope: Scope,
  writer: FileWriter,
  afterPage: (rows: number) => Effect.Effect<void, E, R>
) =>
  Effect.gen(function*() {
    let rows = 0
    yield* repo.batches(companyId, type, scope, writer.shape).pipe(
      Stream.runForEach((batch) =>
        Effect.suspend(() => {
          let wait: Promise<void> | undefined
          try {
            wait = writer.write(batch)
          } catch (e) {
            return Effect.fail(new Error(`write: ${String(e)}`))
          }
          rows += batch.count
          return wait === undefined
            ? afterPage(rows)
            : Effect.andThen(Effect.tryPromise({ try: () => wait, catch: (e) => new Error(`write: ${String(e)}`) }), afterPage(rows))
        }))
    )
    yield* Effect.tryPromise({ try: () => writer.finish(), catch: (e) => new Error(`finish: ${String(e)}`) })
    return rows
  })

/** Marks an export failed and tells its creator (in the caller's transaction); false when it had already finished. */
const failureRecorder = Effect.gen(function*() {
  const repo = yield* ExportsRepo
  const events = yield* Events
  return Effect.fnUntraced(function*(companyId: CompanyId, row: ExportRow, message: string) {
    const failed = yield* repo.fail(companyId, row.id, message)
    if (failed) {
      yield* events.emit(companyId, exportFailedEvent, { id: row.id, uuid: row.uuid, user_id: row.user_id, error_message: message })
    }
    return failed
  })
})

/** The company's export folder on disk. */
const exportsDir = (store: BlobStore["Service"], companyId: CompanyId) =>
  Effect.map(store.absolute(store.newPath(companyId, "exports", "")), dirname)

/** An export is written to `<uuid>.<random>.part` beside the finished files, then renamed. */
const temporaryIn = (dir: string, uuid: string) => join(dir, `${uuid}.${randomUUID()}.part`)

/** Removes the export's half-written files of earlier attempts (their runners died before cleaning up). */
const removeLeftovers = (dir: string, uuid: string) =>
  Effect.promise(async () => {
    const names = await readdir(dir).catch(() => [] as Array<string>)
    await Promise.all(
      names.filter((name) => name.startsWith(`${uuid}.`) && name.endsWith(".part")).map((name) => rm(join(dir, name), { force: true }))
    )
  })

export const gaveUpMessage = "The export stopped: its runs kept being cut off."

const isLeaseLost = (cause: Cause.Cause<unknown>) => {
  const error = Cause.findError(cause)
  return error._tag === "Success" && Predicate.isTagged(error.success, "JobLeaseLost")
}

export const ExportHandler = jobHandler(ExportJob, Effect.gen(function*() {
  const repo = yield* ExportsRepo
  const store = yield* BlobStore
  const events = yield* Events
  const jobs = yield* Jobs
  const sql = yield* SqlClient.SqlClient
  const recordFailure = yield* failureRecorder
  const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    effect.pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))

  const scopeOf = Effect.fnUntraced(function*(companyId: CompanyId, row: ExportRow) {
    const f = row.filters
    if (row.type === "messages") {
      const scope: Scope = {
        ...(f.date_from === undefined ? {} : { from: lowerBound(f.date_from) }),
        ...(f.date_to === undefined ? {} : { until: upperBound(f.date_to) }),
        ...(f.channel_id === undefined ? {} : { channelId: f.channel_id }),
        ...(f.direction === undefined ? {} : { direction: f.direction }),
        ...(f.conversation_id === undefined ? {} : { conversationId: f.conversation_id }),
        ...(f.group_chat_id === undefined ? {} : { groupChatId: f.group_chat_id })
      }
      return scope
    }
    const accountType = f.account_type === undefined ? {} : { accountType: f.account_type }
    if (row.type === "contacts") return accountType as Scope
    const segments = yield* repo.segments(companyId, segmentIdsOf(f))
    const statements = yield* Effect.forEach(segments, (segment) =>
      Effect.flatMap(definitionOf(segment), (definition) => memberIds(companyId, definition)).pipe(
        Effect.provideService(SqlClient.SqlClient, sql)
      ))
    // A segment deleted since the export was queued contributes no one.
    const members = statements.length === 0
      ? sql`SELECT NULL::bigint WHERE false`
      : statements.slice(1).reduce((all, next) => sql`${all} UNION ${next}`, statements[0])
    return { ...accountType, members } as Scope
  })

  /** Streams every row to the file, reporting progress at most once a second; the row count. */
  const writeAll = Effect.fnUntraced(function*(job: JobRun<ExportPayload, never>, row: ExportRow, scope: Scope, writer: FileWriter) {
    const companyId = CompanyId.make(job.companyId)
    let reported = yield* Clock.currentTimeMillis
    return yield* writeRows(repo, companyId, row.type, scope, writer, (rows) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        if (now - reported < Duration.toMillis(progressEvery)) return
        reported = now
        yield* transaction(Effect.gen(function*() {
          yield* repo.setRowCount(companyId, row.id, rows)
          yield* events.emit(companyId, exportProgressEvent, { id: row.id, uuid: row.uuid, user_id: row.user_id, row_count: rows })
          yield* job.renew
        }))
      }))
  })

  const finishFailed = Effect.fnUntraced(function*(job: JobRun<ExportPayload, never>, row: ExportRow, message: string) {
    yield* transaction(Effect.gen(function*() {
      yield* recordFailure(CompanyId.make(job.companyId), row, message)
      yield* job.complete({ outcome: "failed", error_message: message })
    }))
  })

  return (job: JobRun<ExportPayload, never>) =>
    Effect.gen(function*() {
      const companyId = CompanyId.make(job.companyId)
      const found = yield* repo.find(companyId, job.payload.export_id)
      if (Option.isNone(found) || !["pending", "processing"].includes(found.value.status)) return
      const row = found.value
      if (!(yield* repo.start(companyId, row.id, yield* nowDate))) return

      const path = store.newPath(companyId, "exports", `.${row.format}`)
      const dir = yield* exportsDir(store, companyId)
      yield* Effect.promise(() => mkdir(dir, { recursive: true }))
      yield* removeLeftovers(dir, row.uuid)
      // Written beside its final place and renamed into it, so a half-written file is never served.
      const temporary = temporaryIn(dir, row.uuid)
      const removeTemporary = Effect.promise(() => rm(temporary, { force: true }))

      const written = yield* Effect.gen(function*() {
        const scope = yield* scopeOf(companyId, row)
        const header = row.type === "messages" ? messageColumns : contactColumns
        const writer = yield* fileWriter(row.format, temporary, header, row.type)
        const rows = yield* writeAll(job, row, scope, writer).pipe(Effect.onError(() => Effect.sync(() => writer.abort())))
        const size = yield* Effect.promise(() => stat(temporary).then((s) => s.size))
        yield* store.moveIn(temporary, path)
        return { rows, size }
      }).pipe(
        Effect.onError(() => removeTemporary),
        Effect.catchCause((cause) =>
          Cause.hasInterruptsOnly(cause) || isLeaseLost(cause)
            ? Effect.failCause(cause)
            : Effect.logError("export failed", cause).pipe(Effect.as(Option.none<{ rows: number; size: number }>()))
        ),
        Effect.map((value) => (Option.isOption(value) ? value : Option.some(value)))
      )
      if (Option.isNone(written)) return yield* finishFailed(job, row, "The export stopped on an internal error.")

      const now = yield* nowDate
      const expiresAt = new Date(now.getTime() + retentionDays * 86_400_000)
      const kept = yield* transaction(Effect.gen(function*() {
        const completed = yield* repo.complete(companyId, row.id, { rows: written.value.rows, size: written.value.size, path, expiresAt, now })
        if (completed) {
          yield* events.emit(companyId, exportCompletedEvent, {
            id: row.id,
            uuid: row.uuid,
            user_id: row.user_id,
            type: row.type,
            format: row.format,
            row_count: written.value.rows,
            file_size: written.value.size,
            expires_at: expiresAt.toISOString()
          })
          yield* jobs.enqueue(ExportExpiryJob, companyId, { export_id: row.id }, { runAfter: DateTime.fromDateUnsafe(expiresAt) })
        }
        yield* job.complete({ outcome: completed ? "completed" : "discarded", row_count: written.value.rows })
        return completed
      }))
      // Deleted while it was being written: nobody will ask for the file.
      if (!kept) yield* store.remove(path).pipe(Effect.ignore)
    }).pipe(Effect.annotateLogs({ export: job.payload.export_id, company_id: job.companyId }))
}), Effect.gen(function*() {
  // Retries spent, or runners that died on every attempt: the export must not stay `processing`.
  const repo = yield* ExportsRepo
  const store = yield* BlobStore
  const recordFailure = yield* failureRecorder
  return (job: JobGaveUp<ExportPayload>) =>
    Effect.gen(function*() {
      const companyId = CompanyId.make(job.companyId)
      const found = yield* repo.find(companyId, job.payload.export_id)
      if (Option.isNone(found)) return
      yield* removeLeftovers(yield* exportsDir(store, companyId), found.value.uuid)
      yield* recordFailure(companyId, found.value, gaveUpMessage)
    })
}))

export const ExportExpiryHandler = jobHandler(ExportExpiryJob, Effect.gen(function*() {
  const repo = yield* ExportsRepo
  const store = yield* BlobStore
  const jobs = yield* Jobs
  return (job: JobRun<ExportPayload, never>) =>
    Effect.gen(function*() {
      const companyId = CompanyId.make(job.companyId)
      const now = yield* nowDate
      const expired = yield* repo.expire(companyId, job.payload.export_id, now)
      if (Option.isSome(expired)) {
        if (expired.value !== null) yield* store.remove(expired.value)
        return
      }
      // Due early (clocks of several runners): look again when it is due.
      const row = yield* repo.find(companyId, job.payload.export_id)
      if (Option.isSome(row) && row.value.status === "completed" && row.value.expires_at !== null) {
        yield* jobs.enqueue(ExportExpiryJob, companyId, { export_id: job.payload.export_id }, {
          runAfter: DateTime.fromDateUnsafe(row.value.expires_at)
        })
      }
    })
}))

/** What the export kinds need from the runner's layer (for `Jobs.runner`'s type argument). */
export type ExportJobServices =
  | Effect.Services<typeof ExportHandler.make>
  | Effect.Services<typeof ExportExpiryHandler.make>

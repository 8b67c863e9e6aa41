import { Effect } from "effect"
import type ExcelJS from "exceljs"
import { type EventEmitter, once } from "node:events"
import { closeSync, createWriteStream, openSync, type WriteStream, writeSync } from "node:fs"
import type { ExportFormat } from "./Domain.ts"
import { lazyModule } from "../platform/LazyModule.ts"
import type { Batch, BatchShape } from "./Repo.ts"

/** A cell as read from the database: text, number, boolean or nothing. */
export type Cell = string | number | boolean | null

/** Writes the batches of one export to a local file as they come, without holding them. */
export interface FileWriter {
  /** What its batches must be: cells, or CSV records. */
  readonly shape: BatchShape
  /** A promise when the caller must wait for the file, else nothing (see `csvWriter`). */
  write(batch: Batch): Promise<void> | undefined
  /** Flushes and closes the file. */
  finish(): Promise<void>
  /** Closes the file after a failure (the caller removes it). */
  abort(): void
}

const streamWriter = (file: string) => {
  const out: WriteStream = createWriteStream(file, { flags: "wx", mode: 0o640 })
  const failed = new Promise<never>((_, reject) => out.once("error", reject))
  failed.catch(() => undefined)
  const put = async (text: string) => {
    if (!out.write(text)) await Promise.race([once(out, "drain"), failed])
  }
  const end = async () => {
    out.end()
    await Promise.race([once(out, "close"), failed])
  }
  return { put, end, abort: () => out.destroy() }
}

const rowsOf = (batch: Batch) => {
  if (batch.shape !== "rows") throw new Error("expected a batch of cells")
  return batch.rows
}

/**
 * RFC 4180 with CRLF records: the database writes the records (quoting, formula neutralisation),
 * this only adds the BOM, which makes Excel read the file as UTF-8, and the header. Written with
 * `writeSync`, as pino writes logs: one page-cache write of a batch's ~100 KB, where an await per
 * batch would keep the rows the driver reads meanwhile alive into the old space (RSS +100 MB over
 * a 1M-row export, bench/README.md).
 */
const csvWriter = (file: string, header: ReadonlyArray<string>): FileWriter => {
  const fd = openSync(file, "wx", 0o640)
  let open = true
  const put = (text: string) => {
    const bytes = Buffer.from(text, "utf8")
    for (let at = 0; at < bytes.length;) at += writeSync(fd, bytes, at)
  }
  const close = () => {
    if (open) closeSync(fd)
    open = false
  }
  put(`\uFEFF${header.join(",")}\r\n`)
  return {
    shape: "csv",
    write: (batch) => {
      if (batch.shape !== "csv") throw new Error("expected a batch of CSV records")
      for (const piece of batch.csv) put(piece)
      return undefined
    },
    finish: async () => close(),
    abort: close
  }
}

const jsonWriter = (file: string, header: ReadonlyArray<string>): FileWriter => {
  const out = streamWriter(file)
  let first = true
  return {
    shape: "rows",
    write: async (batch) => {
      let chunk = ""
      for (const row of rowsOf(batch)) {
        const record: Record<string, Cell> = {}
        header.forEach((key, i) => (record[key] = row[i]))
        chunk += `${first ? "[\n" : ",\n"}${JSON.stringify(record)}`
        first = false
      }
      await out.put(chunk)
    },
    finish: async () => {
      await out.put(first ? "[]\n" : "\n]\n")
      await out.end()
    },
    abort: out.abort
  }
}

/**
 * XLSX caps a cell at 32,767 characters, and XML readers turn a stored CR into LF anyway: line
 * breaks are written as LF.
 */
const xlsxCell = (cell: Cell) => (typeof cell === "string" ? cell.replace(/\r\n?/g, "\n").slice(0, 32767) : cell)

/** The buffer states of a Node (or `readable-stream`) stream. */
interface StreamState {
  readonly _writableState?: { readonly length?: number; readonly needDrain?: boolean }
  readonly _readableState?: { readonly length?: number }
}

/** Bytes of sheet XML allowed to wait for the compressor before the writer waits for it. */
const xlsxBacklog = 4 * 2 ** 20

const xlsxWriter = (excel: typeof ExcelJS, file: string, header: ReadonlyArray<string>, sheet: string): FileWriter => {
  const out = createWriteStream(file, { flags: "wx", mode: 0o640 })
  const failed = new Promise<never>((_, reject) => out.once("error", reject))
  failed.catch(() => undefined)
  // Inline strings and no styles: every committed row goes straight to the zip stream.
  const workbook = new excel.stream.xlsx.WorkbookWriter({ stream: out, useStyles: false, useSharedStrings: false })
  const worksheet = workbook.addWorksheet(sheet)
  worksheet.addRow([...header]).commit()
  /**
   * exceljs pipes the sheet's XML into the zip stream's input (a `readable-stream` 2 PassThrough)
   * without looking at `write`'s result, so rows pile up there faster than they are deflated:
   * wait for it to drain below the backlog. exceljs 4.4 internals, hence the guards.
   */
  const compressorInput = () =>
    (worksheet as unknown as { stream?: { pipes?: Array<StreamState & EventEmitter> } }).stream?.pipes?.[0]
  const backlog = () => {
    const input = compressorInput()
    return (input?._writableState?.length ?? 0) + (input?._readableState?.length ?? 0)
  }
  const drained = async () => {
    const input = compressorInput()
    while (input !== undefined && backlog() > xlsxBacklog) {
      await Promise.race([
        input._writableState?.needDrain === true ? once(input, "drain") : new Promise((resolve) => setTimeout(resolve, 5)),
        failed
      ])
    }
  }
  return {
    shape: "rows",
    write: (batch) => {
      for (const row of rowsOf(batch)) worksheet.addRow(row.map(xlsxCell)).commit()
      return backlog() > xlsxBacklog ? drained() : undefined
    },
    finish: async () => {
      worksheet.commit()
      await Promise.race([workbook.commit(), failed])
      if (!out.closed) await Promise.race([once(out, "close"), failed])
    },
    abort: () => out.destroy()
  }
}

/** exceljs, loaded by the first spreadsheet export. */
const loadExcel = lazyModule(() => import("exceljs").then((module) => module.default))

export const fileWriter = (format: ExportFormat, file: string, header: ReadonlyArray<string>, sheet: string): Effect.Effect<FileWriter> =>
  format === "csv"
    ? Effect.sync(() => csvWriter(file, header))
    : format === "json"
    ? Effect.sync(() => jsonWriter(file, header))
    : Effect.map(loadExcel, (excel) => xlsxWriter(excel, file, header, sheet))

export const mimeTypes: Record<ExportFormat, string> = {
  csv: "text/csv",
  json: "application/json",
  xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
}

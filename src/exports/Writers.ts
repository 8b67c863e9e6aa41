import ExcelJS from "exceljs"
import { once } from "node:events"
import { createWriteStream, type WriteStream } from "node:fs"
import type { ExportFormat } from "./Domain.ts"

/** A cell as read from the database: text, number, boolean or nothing. */
export type Cell = string | number | boolean | null

/** Writes rows of one export to a local file, batch by batch, without holding them. */
export interface FileWriter {
  write(rows: ReadonlyArray<ReadonlyArray<Cell>>): Promise<void>
  /** Flushes and closes the file. */
  finish(): Promise<void>
  /** Closes the file after a failure (the caller removes it). */
  abort(): void
}

const formulaStart = /^[=+\-@]/

/** Spreadsheet programs run a cell that starts with `=`, `+`, `-` or `@` as a formula; a leading `'` keeps it text. */
export const neutralise = (value: string) => (formulaStart.test(value) ? `'${value}` : value)

const csvField = (cell: Cell) => {
  if (cell === null) return ""
  const text = typeof cell === "string" ? neutralise(cell) : String(cell)
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, "\"\"")}"` : text
}

/** RFC 4180: CRLF records, fields quoted only when they must be. */
export const csvLine = (cells: ReadonlyArray<Cell>) => `${cells.map(csvField).join(",")}\r\n`

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

const csvWriter = (file: string, header: ReadonlyArray<string>): FileWriter => {
  const out = streamWriter(file)
  // The BOM makes Excel read the file as UTF-8.
  let started = false
  return {
    write: async (rows) => {
      let chunk = started ? "" : `\uFEFF${csvLine(header)}`
      started = true
      for (const row of rows) chunk += csvLine(row)
      await out.put(chunk)
    },
    finish: async () => {
      if (!started) await out.put(`\uFEFF${csvLine(header)}`)
      await out.end()
    },
    abort: out.abort
  }
}

const jsonWriter = (file: string, header: ReadonlyArray<string>): FileWriter => {
  const out = streamWriter(file)
  let first = true
  return {
    write: async (rows) => {
      let chunk = ""
      for (const row of rows) {
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

const xlsxWriter = (file: string, header: ReadonlyArray<string>, sheet: string): FileWriter => {
  // Inline strings and no styles: every committed row goes straight to the zip stream.
  const workbook = new ExcelJS.stream.xlsx.WorkbookWriter({ filename: file, useStyles: false, useSharedStrings: false })
  const worksheet = workbook.addWorksheet(sheet)
  worksheet.addRow([...header]).commit()
  return {
    write: async (rows) => {
      for (const row of rows) worksheet.addRow(row.map(xlsxCell)).commit()
      // Lets the zip stream drain to the file between batches.
      await new Promise((resolve) => setImmediate(resolve))
    },
    finish: async () => {
      worksheet.commit()
      await workbook.commit()
    },
    abort: () => undefined
  }
}

export const fileWriter = (format: ExportFormat, file: string, header: ReadonlyArray<string>, sheet: string): FileWriter =>
  format === "csv" ? csvWriter(file, header) : format === "json" ? jsonWriter(file, header) : xlsxWriter(file, header, sheet)

export const mimeTypes: Record<ExportFormat, string> = {
  csv: "text/csv",
  json: "application/json",
  xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
}

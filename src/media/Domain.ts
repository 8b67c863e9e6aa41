import { Schema } from "effect"

export const MediaTypes = ["image", "video", "audio", "voice", "document"] as const
export type MediaType = typeof MediaTypes[number]

/** Spec limits: 64 MB per upload, 32 MB per voice note (in MiB, as `max:65536` kilobytes would be). */
export const uploadLimitBytes = 64 * 1024 * 1024
export const voiceLimitBytes = 32 * 1024 * 1024

/** The flat answer of both upload endpoints. */
export const Upload = Schema.Struct({
  media_id: Schema.Int,
  storage_path: Schema.String,
  type: Schema.Literals(MediaTypes),
  mime_type: Schema.String,
  file_name: Schema.NullOr(Schema.String),
  size: Schema.Int,
  /** Voice notes only: length of the transcoded note in seconds. */
  duration: Schema.optional(Schema.NullOr(Schema.Number))
}).annotate({ identifier: "Upload" })
export type Upload = typeof Upload.Type

export interface MediaRow {
  readonly id: number
  readonly company_id: number
  readonly type: MediaType
  readonly mime_type: string
  readonly file_name: string | null
  readonly size: number
  readonly storage_path: string
  readonly duration_seconds: number | null
}

/** Widths the media route makes thumbnails for; any other `w` serves the original. */
export const thumbnailWidths = [256, 640] as const

const rasterImages = new Set(["image/jpeg", "image/png", "image/webp", "image/gif", "image/avif", "image/tiff"])

/** Images sharp can shrink into a WebP thumbnail (never SVG: it is a document, not pixels). */
export const isThumbnailable = (mime: string | null) => mime !== null && rasterImages.has(mime.toLowerCase())

/** `type/subtype` in lower case without parameters, or null when it is not one. */
export const normalizeMime = (value: string | null | undefined): string | null => {
  const mime = value?.split(";")[0].trim().toLowerCase() ?? ""
  return /^[a-z0-9][a-z0-9.+-]*\/[a-z0-9][a-z0-9.+-]*$/.test(mime) ? mime : null
}

const extensionMimes: Record<string, string> = {
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  png: "image/png",
  gif: "image/gif",
  webp: "image/webp",
  avif: "image/avif",
  svg: "image/svg+xml",
  heic: "image/heic",
  mp4: "video/mp4",
  mov: "video/quicktime",
  webm: "video/webm",
  mkv: "video/x-matroska",
  ogg: "audio/ogg",
  oga: "audio/ogg",
  opus: "audio/ogg",
  mp3: "audio/mpeg",
  mpeg: "audio/mpeg",
  m4a: "audio/mp4",
  aac: "audio/aac",
  wav: "audio/wav",
  pdf: "application/pdf",
  txt: "text/plain",
  csv: "text/csv",
  html: "text/html",
  htm: "text/html",
  xml: "application/xml",
  json: "application/json",
  zip: "application/zip",
  doc: "application/msword",
  docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  xls: "application/vnd.ms-excel",
  xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
}

const mimeExtensions: Record<string, string> = {
  "image/jpeg": ".jpg",
  "image/png": ".png",
  "image/gif": ".gif",
  "image/webp": ".webp",
  "image/avif": ".avif",
  "image/svg+xml": ".svg",
  "video/mp4": ".mp4",
  "video/webm": ".webm",
  "video/quicktime": ".mov",
  "audio/ogg": ".ogg",
  "audio/mpeg": ".mp3",
  "audio/mp4": ".m4a",
  "audio/aac": ".aac",
  "audio/wav": ".wav",
  "application/pdf": ".pdf"
}

export const extensionOf = (fileName: string | null) => {
  const match = fileName === null ? null : /\.([A-Za-z0-9]{1,10})$/.exec(fileName)
  return match === null ? null : match[1].toLowerCase()
}

export const mimeFromFileName = (fileName: string | null) => {
  const ext = extensionOf(fileName)
  return ext === null ? null : extensionMimes[ext] ?? null
}

/** The stored file's extension (with its dot): known types by mime, else none. */
export const storageExtension = (mime: string) => mimeExtensions[mime] ?? ""

export const mediaTypeOf = (mime: string): MediaType =>
  mime.startsWith("image/") ? "image" : mime.startsWith("video/") ? "video" : mime.startsWith("audio/") ? "audio" : "document"

/** The client's file name, reduced to a safe base name of at most 255 characters (null when nothing is left). */
export const cleanFileName = (name: string | null | undefined): string | null => {
  if (name === null || name === undefined) return null
  const base = name.split(/[\\/]/).pop()!.replace(/[\u0000-\u001f\u007f"]/g, "").trim()
  return base === "" || base === "." || base === ".." ? null : base.slice(-255)
}

/** An attachment row of a message before it has an id: an upload, a sticker copy or a provider's reference. */
export interface NewAttachment {
  readonly type: string
  readonly mime_type: string | null
  readonly url: string | null
  readonly thumbnail_url: string | null
  readonly storage_path: string | null
  readonly media_id: number | null
  readonly sticker_id: number | null
  readonly file_name: string | null
  readonly size: number | null
}

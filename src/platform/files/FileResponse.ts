import { Effect, Option, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { createHash } from "node:crypto"
import { type NotFound, notFound } from "../Errors.ts"
import type { BlobError, BlobStore, ByteRange } from "./BlobStore.ts"

const inlineSafe = /^(image\/(jpeg|png|webp|gif|avif|bmp)|audio\/[a-z0-9.+-]+|video\/[a-z0-9.+-]+|application\/pdf)$/

/**
 * Types a browser may render in place. Anything else (SVG, HTML, XML, text, scripts and
 * unknowns) is served as `application/octet-stream` with an attachment disposition.
 */
export const isInlineSafe = (mime: string | null) => mime !== null && inlineSafe.test(mime.toLowerCase())

/** `filename="…"` in ASCII plus the exact name as RFC 5987 `filename*`. */
export const contentDisposition = (kind: "inline" | "attachment", fileName: string | null) => {
  if (fileName === null) return kind
  const ascii = fileName.replace(/[^\x20-\x7e]/g, "_").replace(/["\\]/g, "_")
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(fileName)}`
}

/** How a file is presented: its type (unsafe ones are downgraded), its download name and how long it may be cached. */
export interface FileMeta {
  readonly mimeType: string | null
  readonly fileName: string | null
  readonly cacheControl?: string
}

/** The bytes behind an answer and their validators. */
interface FileBody {
  readonly size: number
  /** Strong entity tag, without its quotes. */
  readonly tag: string
  readonly modifiedAt: Date | null
  read(range?: ByteRange): Stream.Stream<Uint8Array, BlobError>
}

const digest = (data: string | Uint8Array) => createHash("sha256").update(data).digest("base64url").slice(0, 22)

const rangeHeader = /^bytes=(\d*)-(\d*)$/i

/**
 * The single byte range a `Range` header asks for, `"unsatisfiable"` (416), or undefined when
 * the header is absent, malformed, names several ranges or has `last < first`: RFC 9110 lets a
 * server ignore those and send the whole file.
 */
export const parseRange = (header: string | undefined, size: number): ByteRange | "unsatisfiable" | undefined => {
  const match = header === undefined ? null : rangeHeader.exec(header.trim().replace(/\s+/g, ""))
  if (match === null) return undefined
  const [, first, last] = match
  if (first === "" && last === "") return undefined
  if (first === "") {
    const suffix = Number(last)
    return suffix === 0 || size === 0 ? "unsatisfiable" : { start: Math.max(0, size - suffix), end: size - 1 }
  }
  const start = Number(first)
  if (last !== "" && Number(last) < start) return undefined
  if (start >= size) return "unsatisfiable"
  return { start, end: last === "" ? size - 1 : Math.min(Number(last), size - 1) }
}

const entityTags = (header: string) => header.split(",").map((t) => t.trim().replace(/^W\//, "")).filter((t) => t !== "")

/** `If-None-Match` (weak comparison) or, without it, `If-Modified-Since` at one-second precision. */
const notModified = (headers: Readonly<Record<string, string | undefined>>, etag: string, modifiedAt: Date | null) => {
  const noneMatch = headers["if-none-match"]
  if (noneMatch !== undefined) return entityTags(noneMatch).some((t) => t === "*" || t === etag)
  const since = headers["if-modified-since"]
  if (since === undefined || modifiedAt === null) return false
  const sinceMs = Date.parse(since)
  return !Number.isNaN(sinceMs) && Math.floor(modifiedAt.getTime() / 1000) * 1000 <= sinceMs
}

/** `If-Range` honours the range only for our exact strong tag; a date (or a stale tag) gets the whole file. */
const rangeStillValid = (ifRange: string | undefined, etag: string) => ifRange === undefined || ifRange.trim() === etag

/**
 * A file as an HTTP answer, for every route that serves stored bytes. Types a browser would
 * render as a document of our origin (SVG, HTML, XML, text…) go out as
 * `application/octet-stream` with an attachment disposition; every answer carries
 * `X-Content-Type-Options: nosniff`, `Accept-Ranges: bytes` and a strong `ETag`.
 * `If-None-Match` / `If-Modified-Since` give 304; one `Range` on a GET gives 206 with just
 * those bytes, an unsatisfiable one 416 `{message}`; HEAD is the GET answer without its body.
 */
const answer = Effect.fnUntraced(function*(body: FileBody, meta: FileMeta) {
  // Read from the context rather than required, so services that hand back a file answer keep
  // their signatures; outside a request (never on a route) there are no conditions: the whole file.
  const request = yield* Effect.serviceOption(HttpServerRequest.HttpServerRequest)
  const method = Option.match(request, { onNone: () => "GET", onSome: (r) => r.method })
  const requestHeaders: Readonly<Record<string, string | undefined>> = Option.match(request, {
    onNone: () => ({}),
    onSome: (r) => r.headers
  })
  const etag = `"${body.tag}"`
  const validators: Record<string, string> = body.modifiedAt === null
    ? { etag }
    : { etag, "last-modified": body.modifiedAt.toUTCString() }
  const cacheControl = meta.cacheControl ?? "private, max-age=86400"
  if (notModified(requestHeaders, etag, body.modifiedAt)) {
    return HttpServerResponse.empty({ status: 304, headers: { ...validators, "cache-control": cacheControl, "accept-ranges": "bytes" } })
  }
  // RFC 9110 defines ranges for GET only: a HEAD answers the whole file's headers.
  const range = method === "GET" && rangeStillValid(requestHeaders["if-range"], etag)
    ? parseRange(requestHeaders["range"], body.size)
    : undefined
  if (range === "unsatisfiable") {
    return HttpServerResponse.jsonUnsafe({ message: "The requested range is not satisfiable." }, {
      status: 416,
      headers: { "content-range": `bytes */${body.size}`, "accept-ranges": "bytes", "x-content-type-options": "nosniff" }
    })
  }
  const inline = isInlineSafe(meta.mimeType)
  const contentType = inline ? meta.mimeType! : "application/octet-stream"
  const headers = {
    ...validators,
    "accept-ranges": "bytes",
    "content-disposition": contentDisposition(inline ? "inline" : "attachment", meta.fileName),
    "x-content-type-options": "nosniff",
    "cache-control": cacheControl
  }
  if (range === undefined) return HttpServerResponse.stream(body.read(), { contentType, contentLength: body.size, headers })
  return HttpServerResponse.stream(body.read(range), {
    status: 206,
    contentType,
    contentLength: range.end - range.start + 1,
    headers: { ...headers, "content-range": `bytes ${range.start}-${range.end}/${body.size}` }
  })
})

/**
 * A stored file, streamed from disk (a range reads only its bytes). Its tag covers the storage
 * path, size and modification time: a stored file is never rewritten in place, so it changes
 * only when the route starts serving another file.
 */
export const fileResponse = (
  store: BlobStore["Service"],
  storagePath: string,
  meta: FileMeta
): Effect.Effect<HttpServerResponse.HttpServerResponse, NotFound> =>
  Effect.flatMap(store.stat(storagePath).pipe(Effect.orDie), (stat) =>
    Option.match(stat, {
      onNone: () => Effect.fail(notFound("File not found.")),
      onSome: ({ size, modifiedAt }) =>
        answer({
          size,
          tag: digest(`${storagePath}\0${size}\0${modifiedAt.getTime()}`),
          modifiedAt,
          read: (range) => store.read(storagePath, range)
        }, meta)
    }))

/** Bytes made or fetched for this answer (a remote picture): the same answer, tagged by a hash of the content. */
export const bytesFileResponse = (
  bytes: Uint8Array,
  meta: FileMeta
): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  answer({
    size: bytes.byteLength,
    tag: digest(bytes),
    modifiedAt: null,
    read: (range) => Stream.succeed(range === undefined ? bytes : bytes.subarray(range.start, range.end + 1))
  }, meta)

import { Effect } from "effect"
import { HttpBody, HttpServerResponse } from "effect/http"
import { promisify } from "node:util"
import * as zlib from "node:zlib"

export type Coding = "br" | "gzip"

/** Below this a compressed body saves less than the work and the header cost. */
export const minCompressedBytes = 1024

const compressible = /^(application\/(json|javascript|xml|[a-z0-9.+-]*\+json)|text\/|image\/svg\+xml)/i

/**
 * The coding to answer in for an `Accept-Encoding` header (RFC 9110 §12.5.3): `br` where the client takes
 * it at least as willingly as `gzip`, else `gzip`, else none. `q=0` refuses a coding; `*` stands for any
 * coding not named.
 */
export const negotiate = (header: string | undefined): Coding | undefined => {
  if (header === undefined || header.trim() === "") return undefined
  const weights = new Map<string, number>()
  for (const part of header.split(",")) {
    const [name = "", ...params] = part.split(";").map((s) => s.trim().toLowerCase())
    if (name === "") continue
    const q = params.find((p) => p.startsWith("q="))
    const weight = q === undefined ? 1 : Number(q.slice(2))
    weights.set(name, Number.isFinite(weight) ? weight : 0)
  }
  const weight = (coding: Coding) => weights.get(coding) ?? weights.get("*") ?? 0
  const br = weight("br")
  const gzip = weight("gzip")
  if (br > 0 && br >= gzip) return "br"
  return gzip > 0 ? "gzip" : undefined
}

const brotli = promisify(zlib.brotliCompress)
const gzip = promisify(zlib.gzip)

// Brotli quality 5 and gzip level 6: a few milliseconds for a large JSON answer, on the thread pool, not the loop.
const encode = (coding: Coding, bytes: Uint8Array): Promise<Uint8Array> =>
  coding === "br"
    ? brotli(bytes, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length } })
    : gzip(bytes, { level: 6 })

// The documents (/openapi.json, /docs) are one response object per process: compressed once per coding.
const encoded = new WeakMap<HttpBody.Uint8Array, Map<Coding, Promise<Uint8Array>>>()

const encodedOnce = (body: HttpBody.Uint8Array, coding: Coding) => {
  const byCoding = encoded.get(body) ?? new Map<Coding, Promise<Uint8Array>>()
  encoded.set(body, byCoding)
  const known = byCoding.get(coding)
  if (known !== undefined) return known
  const made = encode(coding, body.body)
  byCoding.set(coding, made)
  return made
}

/**
 * The response compressed in the coding the request accepts, when its body is text of at least
 * `minCompressedBytes` held in memory and carries no coding yet. Files (streamed, served by byte ranges) are
 * left as they are: a range names bytes of the file, not of a compressed copy. A response that could have been compressed says
 * `Vary: Accept-Encoding` either way, so a cache keeps the codings apart.
 */
export const compressed = (acceptEncoding: string | undefined, response: HttpServerResponse.HttpServerResponse) => {
  const body = response.body
  if (
    body._tag !== "Uint8Array" || body.contentLength < minCompressedBytes || !compressible.test(body.contentType) ||
    response.headers["content-encoding"] !== undefined || response.headers["accept-ranges"] !== undefined ||
    response.status === 204 || response.status === 206 || response.status === 304
  ) {
    return Effect.succeed(response)
  }
  const varied = HttpServerResponse.setHeader(response, "vary", "Accept-Encoding")
  const coding = negotiate(acceptEncoding)
  if (coding === undefined) return Effect.succeed(varied)
  return Effect.promise(() => encodedOnce(body, coding)).pipe(
    Effect.map((bytes) =>
      HttpServerResponse.setHeader(
        HttpServerResponse.setBody(varied, HttpBody.uint8Array(bytes, body.contentType)),
        "content-encoding",
        coding
      )
    )
  )
}

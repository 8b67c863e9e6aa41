import { Duration, Effect, Option, Schema } from "effect"
import { HttpClient, type HttpClientRequest } from "effect/http"
import { readFile } from "node:fs/promises"
import { isAbsolute, join, normalize } from "node:path"
import { AppConfig } from "../platform/Config.ts"
import { ProviderError } from "./Provider.ts"

export interface RawAnswer {
  readonly status: number
  readonly contentType: string | null
  readonly bytes: Uint8Array
}

export const unavailable = (message: string) => new ProviderError({ code: "unavailable", message })
export const rejected = (message: string) => new ProviderError({ code: "rejected", message })
export const notSupported = (message: string) => new ProviderError({ code: "not_supported", message })

/** JSON of an answer, or None when it is not JSON. */
export const parseJson = (answer: RawAnswer): Option.Option<unknown> =>
  Option.liftThrowable(() => JSON.parse(Buffer.from(answer.bytes).toString("utf8")) as unknown)()

export const decodeAs = <S extends Schema.Top & { readonly DecodingServices: never }>(schema: S) => {
  const decode = Schema.decodeUnknownOption(schema)
  return (value: unknown): Option.Option<S["Type"]> => decode(value)
}

/**
 * The HTTP side every real adapter shares: a time limit per call, transport failures and
 * timeouts as `unavailable`, the whole answer read into memory (provider answers and
 * messenger media are small). Spans are off: Bot API URLs carry the token.
 */
export const makeProviderHttp = Effect.gen(function*() {
  const client = yield* HttpClient.HttpClient
  const config = yield* AppConfig
  const timeout = Duration.millis(config.providerTimeoutMs)

  const execute = (request: HttpClientRequest.HttpClientRequest, what: string): Effect.Effect<RawAnswer, ProviderError> =>
    client.execute(request).pipe(
      Effect.flatMap((response) =>
        Effect.map(response.arrayBuffer, (buffer) => ({
          status: response.status,
          contentType: response.headers["content-type"] ?? null,
          bytes: new Uint8Array(buffer)
        }))
      ),
      Effect.timeoutOrElse({
        duration: timeout,
        orElse: () => Effect.fail(unavailable(`${what} did not answer within ${Duration.format(timeout)}.`))
      }),
      Effect.catchTag("HttpClientError", () => Effect.fail(unavailable(`${what} could not be reached.`))),
      Effect.provideService(HttpClient.TracerDisabledWhen, () => true)
    )

  /** Bytes of a local file to upload: absolute, or relative to the storage directory. */
  const readLocal = (storagePath: string): Effect.Effect<Uint8Array, ProviderError> => {
    const path = isAbsolute(storagePath) ? storagePath : join(config.storageDir, normalize(storagePath))
    return Effect.tryPromise({
      try: () => readFile(path).then((buffer) => new Uint8Array(buffer)),
      catch: () => rejected("The attachment file could not be read.")
    })
  }

  return { execute, readLocal }
})

const mimeByExtension: Record<string, string> = {
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  png: "image/png",
  gif: "image/gif",
  webp: "image/webp",
  ogg: "audio/ogg",
  oga: "audio/ogg",
  mp3: "audio/mpeg",
  m4a: "audio/mp4",
  mp4: "video/mp4",
  pdf: "application/pdf",
  tgs: "application/x-tgsticker",
  webm: "video/webm"
}

export const mimeFromName = (name: string | null): string | null => {
  const ext = name?.split(".").pop()?.toLowerCase()
  return ext === undefined ? null : mimeByExtension[ext] ?? null
}

/** A usable content type: the answer's own unless it is the generic octet-stream. */
export const contentTypeOf = (answer: RawAnswer, name: string | null): string | null => {
  const header = answer.contentType?.split(";")[0].trim() ?? null
  if (header !== null && header !== "" && header !== "application/octet-stream") return header
  return mimeFromName(name) ?? header
}

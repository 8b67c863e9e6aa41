import { Schema } from "effect"
import { Multipart } from "effect/http"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Authentication } from "../auth/Middleware.ts"
import { AuthErrors, Unprocessable } from "../platform/Errors.ts"
import { Upload, uploadLimitBytes, voiceLimitBytes } from "./Domain.ts"
import { SignedRouteErrors, signedQuery } from "../platform/files/SignedQuery.ts"

// The parser counts a part's headers into its size, so its limit has some slack; the blob store
// enforces the exact byte limit on the file's content.
const form = (limit: number) =>
  Schema.Struct({ file: Multipart.SingleFileSchema }).pipe(HttpApiSchema.asMultipartStream({
    maxParts: 10,
    maxFieldSize: 64 * 1024,
    maxFileSize: limit + 64 * 1024,
    maxTotalSize: limit + 1024 * 1024
  }))

/** A JSON body is answered 422 on `file` (not 415 text), like any other malformed request. */
const NotAForm = Schema.Struct({ file: Schema.Never })

const Uploaded = Upload.pipe(HttpApiSchema.status(201))

export class UploadsApi extends HttpApiGroup.make("uploads")
  .add(
    HttpApiEndpoint.post("upload", "/v1/uploads", {
      payload: [form(uploadLimitBytes), NotAForm],
      success: Uploaded,
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Multipart `file` up to 64 MB (image, video, audio or document), streamed to storage. " +
        "Flat answer; `media_id` goes into `attachments[]` of a send."
    })),
    HttpApiEndpoint.post("voice", "/v1/uploads/voice", {
      payload: [form(voiceLimitBytes), NotAForm],
      success: Uploaded,
      error: [...AuthErrors, Unprocessable]
    }).annotateMerge(OpenApi.annotations({
      description: "Multipart `file` up to 32 MB (webm, ogg, mp4, mpeg, wav, aac, m4a), transcoded to Opus in Ogg so the " +
        "recipient sees a voice note; 422 when it cannot be transcoded. Playlists and concat lists are refused."
    }))
  )
  .middleware(Authentication)
  .annotateMerge(OpenApi.annotations({ title: "Uploads", description: "Files to attach to messages." }))
{}

/** Signed public route: the signature in the query is the authorization. */
export class SignedMediaApi extends HttpApiGroup.make("signedMedia")
  .add(
    HttpApiEndpoint.get("attachmentMedia", "/v1/messages/:id/attachments/:attachment/media", {
      params: { id: Schema.Int, attachment: Schema.Int },
      query: { ...signedQuery, w: Schema.optional(Schema.String) },
      success: Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "application/octet-stream" })),
      error: SignedRouteErrors
    }).annotateMerge(OpenApi.annotations({
      description: "Bytes of a locally stored attachment. Signed link (no Authorization header); 2000 requests a minute per IP. " +
        "`w` = 256 or 640 gives a WebP thumbnail of an image (made once and kept); any other `w`, or a non-image, " +
        "gives the original. Unsafe inline types are sent as `application/octet-stream` with an attachment disposition. " +
        "One `Range` gives 206 with `Content-Range` (416 `{message}` with `bytes */size` when unsatisfiable; several ranges " +
        "give the whole file); `ETag` / `Last-Modified` with `If-None-Match` / `If-Modified-Since` give 304; `If-Range` " +
        "honours the range only for the current ETag; HEAD answers the same headers without the body."
    }))
  )
  .annotateMerge(OpenApi.annotations({ title: "Signed media" }))
{}

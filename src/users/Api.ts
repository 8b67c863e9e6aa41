import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { SignedRouteErrors, signedQuery } from "../platform/files/SignedQuery.ts"

/** Signed public route: the signature in the query is the authorization (no Authorization header). */
export class UserPhotosApi extends HttpApiGroup.make("userPhotos")
  .add(
    HttpApiEndpoint.get("photo", "/v1/users/:user/photo", {
      params: { user: Schema.Int },
      query: { ...signedQuery, v: Schema.optional(Schema.String) },
      success: Schema.Uint8Array.pipe(HttpApiSchema.asUint8Array({ contentType: "image/webp" })),
      error: SignedRouteErrors
    }).annotateMerge(OpenApi.annotations({
      description: "The user's photo (`photo_url` of `GET /v1/me`, `GET /v1/users` and the members list; set with " +
        "`photo_media_id` on `POST /v1/me`). A decodable image wider than 256 px is answered as a WebP preview 256 px wide, " +
        "anything else as the original. 2000 requests a minute per IP; 403 `Invalid signature.`; 404 when the user has no " +
        "photo or is not a member of the company the link was made for."
    }))
  )
  .annotateMerge(OpenApi.annotations({ title: "User photos" }))
{}

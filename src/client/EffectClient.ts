import { Effect } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import { Api } from "../Api.ts"

/**
 * A typed client of the whole API, derived from the contract (`src/Api.ts`) by Effect's `HttpApiClient`:
 * `client.<group>.<endpoint>({ params, query, payload })`, answers decoded with the contract's schemas and
 * refusals as the contract's typed errors. `token` is a bearer token (`<id>|<secret>`) or the platform key.
 */
export const makeClient = (baseUrl: string, token: string) =>
  HttpApiClient.make(Api, {
    baseUrl,
    transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(token))
  })

/** The same, on the runtime's `fetch`, for programs that provide no HttpClient of their own. */
export const makeFetchClient = (baseUrl: string, token: string) =>
  makeClient(baseUrl, token).pipe(Effect.provide(FetchHttpClient.layer))

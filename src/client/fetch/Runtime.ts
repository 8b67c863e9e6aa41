/**
 * What every operation of the generated fetch client (`./Client.ts`) shares: building the URL and the
 * body, the bearer token, and reading the answer. It needs nothing but the runtime's `fetch`, and uses no
 * TypeScript that type stripping cannot erase, so Node 24, Deno and Bun run both files as they are.
 */

export interface ClientOptions {
  /** The server's root, e.g. `http://localhost:8080`. */
  readonly baseUrl: string
  /** A company token (`<id>|<secret>`), a mobile token, or the platform key for `/platform/v1`. */
  readonly token?: string
  /** Headers sent with every request. */
  readonly headers?: Record<string, string>
  /** Another `fetch` (a test double, a proxy agent); the global one by default. */
  readonly fetch?: typeof fetch
}

/** A documented success: `data` is the decoded JSON body, a `Blob` for files, `undefined` without a body. */
export interface Success<S extends number, T> {
  readonly ok: true
  readonly status: S
  readonly data: T
  readonly response: Response
}

/** A documented refusal: `error` is the body the contract gives that status (`message`, `errors`, …). */
export interface Failure<S extends number, E> {
  readonly ok: false
  readonly status: S
  readonly error: E
  readonly response: Response
}

/** An answer whose status the operation does not document (a 500), or a refusal passed to `unwrap`. */
export class ApiError extends Error {
  override readonly name = "ApiError"
  readonly status: number
  readonly body: unknown
  readonly url: string
  constructor(status: number, body: unknown, url: string) {
    super(`${status} from ${url}: ${typeof body === "string" ? body : JSON.stringify(body)}`)
    this.status = status
    this.body = body
    this.url = url
  }
}

export interface Operation {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
  readonly path: string
  readonly statuses: ReadonlyArray<number>
}

export interface Request {
  readonly params?: Record<string, string | number>
  readonly query?: Record<string, unknown>
  readonly payload?: unknown
  readonly headers?: Record<string, string | undefined>
}

/** Per call: an `AbortSignal`, and headers added to this request only. */
export interface CallOptions {
  readonly signal?: AbortSignal
  readonly headers?: Record<string, string>
}

const pathOf = (template: string, params: Request["params"]) =>
  template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = params?.[name]
    if (value === undefined) throw new TypeError(`missing path parameter ${name} of ${template}`)
    return encodeURIComponent(String(value))
  })

const queryOf = (query: Request["query"]) => {
  const search = new URLSearchParams()
  for (const [key, value] of Object.entries(query ?? {})) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== undefined && item !== null) search.append(key, String(item))
    }
  }
  const text = search.toString()
  return text === "" ? "" : `?${text}`
}

const bodyOf = (payload: unknown): { body?: string | FormData; type?: string } => {
  if (payload === undefined) return {}
  if (payload instanceof FormData) return { body: payload }
  return { body: JSON.stringify(payload), type: "application/json" }
}

const headersOf = (options: ClientOptions, request: Request, type: string | undefined, call: CallOptions) => {
  const headers: Record<string, string> = { accept: "application/json", ...options.headers }
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
  if (type !== undefined) headers["content-type"] = type
  for (const [name, value] of Object.entries(request.headers ?? {})) if (value !== undefined) headers[name] = value
  return { ...headers, ...call.headers }
}

const readBody = async (response: Response): Promise<unknown> => {
  const type = response.headers.get("content-type") ?? ""
  if (response.status === 204 || (response.status >= 300 && response.status < 400)) return undefined
  if (type.includes("json")) {
    const text = await response.text()
    return text === "" ? undefined : JSON.parse(text)
  }
  if (type.startsWith("text/")) return response.text()
  const blob = await response.blob()
  return blob.size === 0 && type === "" ? undefined : blob
}

/** Sends one operation and reads its answer; a status the operation does not document throws `ApiError`. */
export const call = async (options: ClientOptions, operation: Operation, request: Request, init: CallOptions = {}) => {
  const url = `${options.baseUrl.replace(/\/+$/, "")}${pathOf(operation.path, request.params)}${queryOf(request.query)}`
  const { body, type } = bodyOf(request.payload)
  const response = await (options.fetch ?? fetch)(url, {
    method: operation.method,
    headers: headersOf(options, request, type, init),
    redirect: "manual",
    ...(body === undefined ? {} : { body }),
    ...(init.signal === undefined ? {} : { signal: init.signal })
  })
  const read = await readBody(response)
  if (!operation.statuses.includes(response.status)) throw new ApiError(response.status, read, `${operation.method} ${url}`)
  return response.ok || (response.status >= 300 && response.status < 400)
    ? { ok: true, status: response.status, data: read, response }
    : { ok: false, status: response.status, error: read, response }
}

/** The data of a success; a documented refusal throws `ApiError` with the refusal's body. */
export const unwrap = <R extends Success<number, unknown> | Failure<number, unknown>>(
  result: R
): Extract<R, { ok: true }>["data"] => {
  if (result.ok) return result.data
  throw new ApiError(result.status, result.error, result.response.url)
}

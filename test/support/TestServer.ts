import { Context, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { HttpServer } from "effect/http"
import { makeApp } from "../../src/App.ts"
import { AppConfig, type AppConfigShape } from "../../src/platform/Config.ts"
import { RealtimeGateway } from "../../src/realtime/Gateway.ts"
import { unique } from "./Ids.ts"

export type AppServices = Layer.Success<ReturnType<typeof makeApp>>

export interface TestServer {
  readonly url: string
  readonly platformKey: string
  readonly close: () => Promise<void>
}

/** What `startServer` returns: the server plus its realtime port and a way into the running app. */
export interface RunningServer extends TestServer {
  /** The realtime gateway's (Pusher protocol) port; the app key is `pusherAppKey`. */
  readonly realtimePort: number
  readonly pusherAppKey: string
  /** Runs an effect inside the running app (its database, Events, services), e.g. to emit an event. */
  readonly runInApp: <A, E>(effect: Effect.Effect<A, E, AppServices>) => Promise<A>
}

/**
 * A whole app on ephemeral ports: PostgreSQL from DATABASE_URL when set (each test
 * makes its own company, so files share it safely), else an in-memory PGlite.
 */
export const startServer = async (overrides: Partial<AppConfigShape> = {}): Promise<RunningServer> => {
  const platformKey = `test-platform-key-${Math.random().toString(36).slice(2)}`
  const config = AppConfig.layerWith({
    port: 0,
    realtimePort: 0,
    host: "127.0.0.1",
    cluster: "single",
    platformApiKey: Option.some(Redacted.make(platformKey)),
    ...(process.env.DATABASE_URL ? {} : { dataDir: "memory://" }),
    ...overrides
  })
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(makeApp(config), scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
  return {
    url: `http://127.0.0.1:${address.port}`,
    platformKey,
    realtimePort: Context.get(context, RealtimeGateway).port,
    pusherAppKey: Context.get(context, AppConfig).pusherAppKey,
    runInApp: (effect) => Effect.runPromise(Effect.provideContext(effect, context)),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

export interface Json {
  readonly status: number
  readonly headers: Headers
  readonly body: any
}

export const request = async (
  server: TestServer,
  method: string,
  path: string,
  options: { readonly token?: string; readonly body?: unknown; readonly raw?: string; readonly headers?: Record<string, string> } = {}
): Promise<Json> => {
  const headers: Record<string, string> = { accept: "application/json", ...options.headers }
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
  let body: string | undefined
  if (options.raw !== undefined) {
    body = options.raw
    headers["content-type"] ??= "application/json"
  } else if (options.body !== undefined) {
    body = JSON.stringify(options.body)
    headers["content-type"] = "application/json"
  }
  return readJson(await fetch(server.url + path, { method, headers, body }))
}

/** A response as `Json`: its body parsed when it is JSON, else its text (`null` when empty). */
export const readJson = async (response: Response): Promise<Json> => {
  const text = await response.text()
  let body: unknown = text
  try {
    body = text === "" ? null : JSON.parse(text)
  } catch {
    body = text
  }
  return { status: response.status, headers: response.headers, body }
}

export interface UploadFile {
  readonly bytes: Uint8Array
  readonly name: string
  /** Default `application/octet-stream`. */
  readonly type?: string
  /** The form field; default `file`. */
  readonly field?: string
}

/** A multipart POST of one or more files, as a browser sends it. */
export const upload = async (
  server: TestServer,
  token: string,
  path: string,
  files: UploadFile | ReadonlyArray<UploadFile>
): Promise<Json> => {
  const form = new FormData()
  for (const file of Array.isArray(files) ? files : [files]) {
    form.append(file.field ?? "file", new Blob([file.bytes], { type: file.type ?? "application/octet-stream" }), file.name)
  }
  return readJson(await fetch(server.url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, accept: "application/json" },
    body: form
  }))
}

/**
 * GET (or HEAD) of a link the API handed out, against the test server (links carry APP_URL's origin),
 * with no Authorization header unless `headers` brings one.
 */
export const getLink = async (server: TestServer, link: string, headers: Record<string, string> = {}, method: "GET" | "HEAD" = "GET") => {
  const url = new URL(link)
  const response = await fetch(server.url + url.pathname + url.search, { headers, method })
  return { status: response.status, headers: response.headers, bytes: new Uint8Array(await response.arrayBuffer()) }
}

/** A fresh company (with its admin and a service token) made through the platform API. */
export const createCompany = async (
  server: TestServer,
  input: { readonly plan?: "free" | "business" | "pro"; readonly name?: string } = {}
) => {
  const suffix = unique()
  const email = `admin-${suffix}@example.test`
  const res = await request(server, "POST", "/platform/v1/companies", {
    token: server.platformKey,
    body: {
      name: input.name ?? `Company ${suffix}`,
      plan: input.plan ?? "business",
      admin: { email, password: "password-123", name: "Admin" }
    }
  })
  if (res.status !== 201) throw new Error(`createCompany failed: ${res.status} ${JSON.stringify(res.body)}`)
  return {
    id: res.body.data.company.id as number,
    token: res.body.data.token as string,
    admin: { id: res.body.data.admin.id as number, email, password: "password-123" }
  }
}

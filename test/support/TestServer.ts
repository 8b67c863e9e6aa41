import { Context, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { HttpServer } from "effect/http"
import { makeApp } from "../../src/App.ts"
import { AppConfig, type AppConfigShape } from "../../src/platform/Config.ts"
import { RealtimeGateway } from "../../src/realtime/Gateway.ts"

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
  const response = await fetch(server.url + path, { method, headers, body })
  const text = await response.text()
  let parsed: unknown = text
  try {
    parsed = text === "" ? null : JSON.parse(text)
  } catch {
    parsed = text
  }
  return { status: response.status, headers: response.headers, body: parsed }
}

let counter = 0
/** A fresh company (with its admin and a service token) made through the platform API. */
export const createCompany = async (
  server: TestServer,
  input: { readonly plan?: "free" | "business" | "pro"; readonly name?: string } = {}
) => {
  const unique = `${Date.now().toString(36)}${(counter++).toString(36)}${Math.random().toString(36).slice(2, 6)}`
  const email = `admin-${unique}@example.test`
  const res = await request(server, "POST", "/platform/v1/companies", {
    token: server.platformKey,
    body: {
      name: input.name ?? `Company ${unique}`,
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

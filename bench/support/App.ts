import { join } from "node:path"
import { freePort, stop, type Workspace } from "./Processes.ts"
import { Context, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { HttpServer } from "effect/http"
import { Tokens } from "../../src/auth/Tokens.ts"
import { AppConfig, type AppConfigShape } from "../../src/platform/Config.ts"

/**
 * The limit is per token over a sliding 60 s window, and a bench sends everything with one token: the
 * default would answer 429 within the first second. The limiter still runs on every request.
 */
export const RATE_LIMIT_PER_WINDOW = 1_000_000_000

export interface AppOptions {
  /** Names the log (`app-<mode>.log`) and the profile directory. */
  readonly mode: string
  readonly logLevel: string
  /** Runs the app with `--cpu-prof`; the profile is written to `profDir` when it exits. */
  readonly profile: boolean
  readonly dataDir: string
  /** PostgreSQL (server mode); `undefined` for embedded mode (PGlite in `dataDir`). */
  readonly databaseUrl: string | undefined
}

export interface AppProcess {
  readonly port: number
  readonly base: string
  /** The realtime gateway's port (`REALTIME_PORT`). */
  readonly realtimePort: number
  readonly platformKey: string
  readonly profDir: string
  readonly pid: number
  readonly stop: () => Promise<void>
}

/** The app as a child process (`node --import tsx src/main.ts`) on fresh ports, once `/health` answers. */
export const startApp = async (ws: Workspace, options: AppOptions): Promise<AppProcess> => {
  const port = await freePort()
  const realtimePort = await freePort()
  const platformKey = `bench-${Math.random().toString(36).slice(2)}`
  const env: Record<string, string | undefined> = {
    ...process.env,
    PORT: String(port),
    REALTIME_PORT: String(realtimePort),
    RUNNER_PORT: String(await freePort()),
    METRICS_PORT: process.env.METRICS_PORT ?? "0",
    HOST: "127.0.0.1",
    PLATFORM_API_KEY: platformKey,
    RATE_LIMIT_PER_WINDOW: String(RATE_LIMIT_PER_WINDOW),
    LOG_LEVEL: options.logLevel,
    DATA_DIR: options.dataDir,
    DATABASE_URL: options.databaseUrl
  }
  if (options.databaseUrl === undefined) delete env.DATABASE_URL
  const profDir = join(ws.dir, `prof-${options.mode}`)
  const name = `app-${options.mode}`
  const args = [...(process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter((f) => f !== ""), "--import", "tsx", ...(options.profile ? ["--cpu-prof", `--cpu-prof-dir=${profDir}`] : []), "src/main.ts"]
  const app = ws.start(name, args, env)
  const base = `http://127.0.0.1:${port}`
  try {
    await ws.waitFor(`${base}/health`, app, name)
  } catch (error) {
    await stop(app)
    throw error
  }
  return { port, base, realtimePort, platformKey, profDir, pid: app.pid!, stop: () => stop(app) }
}

/** A JSON API call with an optional bearer token; answers the status and the parsed body (undefined if not JSON). */
export const api = (base: string, token: string | null) => async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const res = await fetch(base + path, {
    method,
    headers: {
      "content-type": "application/json",
      accept: "application/json",
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      ...headers
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000)
  })
  return { status: res.status, body: (await res.json().catch(() => undefined)) as any }
}

/** A new business-plan company through the platform API: its id and its service token. */
export const createCompany = async (app: AppProcess) => {
  const created = await api(app.base, app.platformKey)("POST", "/platform/v1/companies", {
    name: `Bench ${Date.now()}`,
    plan: "business",
    admin: { email: `bench-${Date.now()}-${process.pid}@example.test`, password: "password-123", name: "Bench" }
  })
  if (created.status !== 201) throw new Error(`create company: ${created.status} ${JSON.stringify(created.body)}`)
  return { companyId: created.body.data.company.id as number, token: created.body.data.token as string }
}

/** The modes named in BENCH_MODES (else `fallback`), in that order, keeping only those in `known`. */
export const requestedModes = <M extends string>(known: ReadonlyArray<M>, fallback: string): Array<M> =>
  (process.env.BENCH_MODES ?? fallback).split(",").map((m) => m.trim()).filter((m): m is M => known.includes(m as M))

/** The whole app inside this process on a bench database: no realtime, rate limits out of the way. */
export const startInProcess = async (url: string, label: string, overrides: Partial<AppConfigShape> = {}) => {
  const config = AppConfig.layerWith({
    databaseUrl: Option.some(Redacted.make(url)),
    port: 0,
    realtimePort: 0,
    host: "127.0.0.1",
    cluster: "single",
    realtimeDisabled: true,
    logLevel: "warn",
    rateLimitPerWindow: RATE_LIMIT_PER_WINDOW,
    ...overrides
  })
  // Imported here, after LOG_LEVEL is set: the logger reads it when its module loads.
  const { makeApp } = await import("../../src/App.ts")
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(makeApp(config), scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
  return {
    base: `http://127.0.0.1:${address.port}`,
    token: (companyId: number) =>
      Effect.runPromise(
        Effect.provideContext(Tokens.use((t) => t.createServiceToken(companyId, { name: "bench", description: label })), context)
      ).then((t) => t.plaintext),
    /** Runs an effect inside the app (its database, services): for benches that time a service directly. */
    runInApp: <A, E>(effect: Effect.Effect<A, E, any>) => Effect.runPromise(Effect.provideContext(effect, context) as Effect.Effect<A, E>),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

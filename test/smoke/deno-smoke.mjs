// Deno smoke: the server from src/main.ts under Deno 2 (the `deno` npm package), embedded mode
// (PGlite in a temp DATA_DIR), then one company through the platform API, GET /v1/me with its token,
// and a pusher-js subscription to the company channel that receives the event of a created team.
//
//   node test/smoke/deno-smoke.mjs        (npm run smoke:deno; SMOKE_BUDGET_S=120 the default)
//
// uWebSockets.js is a V8 addon, not Node-API, so it cannot load under Deno: the realtime gateway
// runs on its `ws` transport there, and /ready must say so.
//
// Ends with SIGTERM to the server process and checks that it drained and exited 0 and that neither it
// nor anything else still holds its port.
import PusherModule from "pusher-js"
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { connect } from "node:net"
import { checks, freePort, json, pusherOn, sleep } from "./support.mjs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"

const root = new URL("../..", import.meta.url).pathname

/**
 * The Deno executable itself. `node_modules/.bin/deno` is a Node script that runs it with `spawnSync`:
 * a SIGTERM stops that script and leaves the server running, orphaned.
 */
const denoExecutable = () => {
  const installed = join(root, "node_modules/deno/deno")
  if (existsSync(installed)) return installed
  const arch = process.arch === "arm64" ? "arm64" : "x64"
  const target = process.platform === "linux" ? `linux-${arch}-glibc` : `${process.platform}-${arch}`
  try {
    return join(dirname(createRequire(import.meta.url).resolve(`@deno/${target}/package.json`)), "deno")
  } catch {
    return installed
  }
}

const deno = denoExecutable()
// SMOKE_BUDGET_S: a loaded machine stretches the start many times over.
const budgetMs = Number(process.env.SMOKE_BUDGET_S ?? 120) * 1000
const deadline = Date.now() + budgetMs - 10_000
const dataDir = mkdtempSync(join(tmpdir(), "crm-deno-smoke-"))
const platformKey = `deno-smoke-${Math.random().toString(36).slice(2)}`
let output = ""
const { counts, check } = checks()
let child

/** SIGTERM, then SIGKILL after 12 s; answers the exit code and whether SIGTERM alone ended it. */
const stop = async () => {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return undefined
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })))
  child.kill("SIGTERM")
  let killed = false
  const timer = setTimeout(() => (killed = true, child.kill("SIGKILL")), 12_000)
  const exit = await exited
  clearTimeout(timer)
  return { ...exit, killed }
}

const alive = (pid) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const listening = (port) =>
  new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port })
    socket.once("connect", () => (socket.destroy(), resolve(true)))
    socket.once("error", () => resolve(false))
  })

/** SIGTERM to the server process: it drains and exits 0, and nothing of it keeps running or listening. */
const stopAndCheck = async (port) => {
  const pid = child.pid
  const exit = await stop()
  if (exit === undefined) return
  check("SIGTERM to the server process: it exits 0 without a SIGKILL", exit.code === 0 && !exit.killed, JSON.stringify(exit))
  check("the server process is gone and its port is closed after SIGTERM", !alive(pid) && !(await listening(port)),
    `pid ${pid} ${alive(pid) ? "still running" : "gone"}; port ${port} ${(await listening(port)) ? "still listening" : "closed"}`)
}

const main = async () => {
  if (!existsSync(deno)) throw new Error(`${deno} is missing: run npm ci (the deno package is a devDependency)`)
  const port = await freePort()
  const realtimePort = await freePort()
  const base = `http://127.0.0.1:${port}`
  const realtimeKey = process.env.PUSHER_APP_KEY ?? "crm"
  const env = {
    ...process.env,
    HOST: "127.0.0.1",
    PORT: String(port),
    REALTIME_PORT: String(realtimePort),
    METRICS_PORT: "0",
    DATA_DIR: dataDir,
    PLATFORM_API_KEY: platformKey,
    LOG_LEVEL: "warn",
    DENO_NO_UPDATE_CHECK: "1",
    DENO_NO_PROMPT: "1",
    NO_COLOR: "1"
  }
  delete env.DATABASE_URL
  delete env.CLUSTER

  const version = await new Promise((resolve) => {
    const p = spawn(deno, ["--version"], { env })
    let out = ""
    p.stdout.on("data", (d) => (out += d))
    p.on("exit", () => resolve(out.split("\n")[0]))
  })
  console.log(`${version}; app on ${base}, DATA_DIR ${dataDir}`)

  const started = Date.now()
  child = spawn(deno, ["run", "-A", "--node-modules-dir=manual", "src/main.ts"], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] })
  child.stdout.on("data", (d) => (output += d))
  child.stderr.on("data", (d) => (output += d))

  let healthy = false
  while (!healthy && Date.now() < deadline && child.exitCode === null) {
    healthy = await fetch(`${base}/health`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.status === 200, () => false)
    if (!healthy) await sleep(250)
  }
  if (!check(`GET /health answers 200 under Deno (${((Date.now() - started) / 1000).toFixed(1)} s to start)`, healthy,
    child.exitCode !== null ? `server exited with ${child.exitCode}` : "no answer before the deadline")) return

  const unique = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`
  const created = await json(`${base}/platform/v1/companies`, {
    method: "POST",
    headers: { authorization: `Bearer ${platformKey}`, "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({
      name: `Deno smoke ${unique}`,
      plan: "business",
      admin: { email: `deno-${unique}@example.test`, password: "password-123", name: "Deno Smoke" }
    })
  })
  const token = created.body?.data?.token
  const companyId = created.body?.data?.company?.id
  if (!check("POST /platform/v1/companies answers 201 with a token", created.status === 201 && typeof token === "string",
    `${created.status} ${JSON.stringify(created.body)}`)) return

  const me = await json(`${base}/v1/me`, { headers: { authorization: `Bearer ${token}`, accept: "application/json" } })
  check("GET /v1/me with that token answers 200 for that company",
    me.status === 200 && me.body?.data?.current_company_id === companyId,
    `${me.status} ${JSON.stringify(me.body)}`)

  const anonymous = await json(`${base}/v1/me`, { headers: { accept: "application/json" } })
  check("GET /v1/me without a token answers 401",
    anonymous.status === 401 && anonymous.body?.message === "Unauthenticated.",
    `${anonymous.status} ${JSON.stringify(anonymous.body)}`)

  const ready = await json(`${base}/ready`)
  check("GET /ready names the ws realtime engine under Deno", ready.status === 200 && ready.body?.realtime?.engine === "ws",
    `${ready.status} ${JSON.stringify(ready.body)}`)

  const { pusher, subscribe } = pusherOn(PusherModule, { appKey: realtimeKey, base, realtimePort, token })
  try {
    const channelName = `private-company.${companyId}`
    const { channel, subscribed: pending } = subscribe(channelName)
    const subscribed = await pending
    if (!check(`pusher-js subscribes to ${channelName}`, subscribed === true, subscribed)) return
    const received = new Promise((resolve) => {
      const timer = setTimeout(() => resolve(undefined), 15_000)
      channel.bind("team.created", (data) => (clearTimeout(timer), resolve(data)))
    })
    const team = await json(`${base}/v1/teams`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ name: `Smoke team ${unique}` })
    })
    const event = await received
    check("a created team reaches the pusher-js subscriber as team.created",
      team.status === 201 && event?.data?.id === team.body?.data?.team?.id,
      `${team.status} ${JSON.stringify(team.body)}; event ${JSON.stringify(event)}`)
  } finally {
    pusher.disconnect()
  }
  await stopAndCheck(port)
}

const timer = setTimeout(() => {
  console.log(`FAIL deno smoke: over its budget of ${budgetMs / 1000} s`)
  void stop().then(() => process.exit(1))
}, budgetMs)

try {
  await main()
} catch (error) {
  check("deno smoke ran", false, error instanceof Error ? error.message : String(error))
}
await stop()
clearTimeout(timer)
if (counts.failed > 0) console.log(`--- server output (last 4000 chars) ---\n${output.slice(-4000)}`)
rmSync(dataDir, { recursive: true, force: true })
console.log(`deno smoke: ${counts.passed} passed, ${counts.failed} failed`)
process.exit(counts.failed > 0 || counts.passed === 0 ? 1 : 0)

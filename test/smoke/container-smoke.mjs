// Container smoke: the server inside the image's root filesystem (scripts/rootfs.sh: Debian 13, the
// pinned Node, `npm ci --omit=dev`), started as the image starts it, then checked from outside as a
// client would: /ready names the uWS engine, one company through the platform API, a pusher-js
// subscription to its channel, a send that reaches the subscriber as `message.created`, and SIGTERM
// to the server's process ending in a drain and exit 0.
//
//   node test/smoke/container-smoke.mjs ROOTFS        (DATABASE_URL set: server mode, else embedded)
import PusherModule from "pusher-js"
import { spawn } from "node:child_process"
import { checks, freePort, json, pusherOn, sleep } from "./support.mjs"

const root = new URL("../..", import.meta.url).pathname
const rootfs = process.argv[2]
const platformKey = `container-smoke-${Math.random().toString(36).slice(2)}`
let output = ""
const { counts, check } = checks()
let child
let exited

const call = (base, token) => (method, path, body) =>
  json(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body)
  })

// Generous: on a shared, loaded machine a first send (cluster entity, provider, commit, numbering) has taken 17 s.
const waitFor = (channel, event, predicate, ms = 60_000) =>
  new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms)
    channel.bind(event, (data) => {
      if (predicate(data)) (clearTimeout(timer), resolve(data))
    })
  })

const main = async () => {
  const [port, realtimePort, runnerPort, metricsPort] = [await freePort(), await freePort(), await freePort(), await freePort()]
  const base = `http://127.0.0.1:${port}`
  const env = {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    NODE_ENV: "production",
    HOST: "127.0.0.1",
    PORT: String(port),
    REALTIME_PORT: String(realtimePort),
    RUNNER_PORT: String(runnerPort),
    RUNNER_HOST: "127.0.0.1",
    METRICS_PORT: String(metricsPort),
    DATA_DIR: "/app/data",
    STORAGE_DIR: "/app/storage",
    PLATFORM_API_KEY: platformKey,
    REALTIME_ENGINE: "uws",
    LOG_LEVEL: "info",
    ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {})
  }
  const started = Date.now()
  // The image's command (Dockerfile CMD), as the PID the signal goes to.
  child = spawn("bash", [`${root}/scripts/rootfs.sh`, "run", rootfs, "/usr/bin/env", "-i", ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    "/usr/local/bin/node", "--max-semi-space-size=8", "src/main.ts"], { stdio: ["ignore", "pipe", "pipe"] })
  child.stdout.on("data", (d) => (output += d))
  child.stderr.on("data", (d) => (output += d))
  exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })))

  let ready
  const deadline = Date.now() + 120_000
  while (ready?.status !== 200 && Date.now() < deadline && child.exitCode === null) {
    ready = await json(`${base}/ready`).catch(() => undefined)
    if (ready?.status !== 200) await sleep(250)
  }
  if (!check(`GET /ready answers 200 inside the image's filesystem (${((Date.now() - started) / 1000).toFixed(1)} s)`, ready?.status === 200,
    child.exitCode !== null ? `exited with ${child.exitCode}` : JSON.stringify(ready))) return
  check("the realtime gateway runs on uWebSockets.js there", ready.body?.realtime?.engine === "uws", JSON.stringify(ready.body))

  const unique = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`
  const created = await call(base, platformKey)("POST", "/platform/v1/companies", {
    name: `Container smoke ${unique}`,
    plan: "business",
    admin: { email: `container-${unique}@example.test`, password: "password-123", name: "Container Smoke" }
  })
  const token = created.body?.data?.token
  const companyId = created.body?.data?.company?.id
  if (!check("POST /platform/v1/companies answers 201 with a token", created.status === 201, `${created.status} ${JSON.stringify(created.body)}`)) return
  const api = call(base, token)

  const { pusher, subscribe } = pusherOn(PusherModule, { appKey: "crm", base, realtimePort, token })
  try {
    const channelName = `private-company.${companyId}`
    const { channel, subscribed: pending } = subscribe(channelName)
    const subscribed = await pending
    if (!check(`pusher-js subscribes to ${channelName} over uWS`, subscribed === true, subscribed)) return

    const sandbox = await api("POST", "/v1/channels", { type: "msgr_b", provider: "sandbox", name: "container" })
    const inbound = await api("POST", `/v1/channels/${sandbox.body?.data?.id}/sandbox/inbound`, { from: { external_id: `c-${unique}`, name: "Contact" }, text: "hi" })
    const conversation = await api("GET", `/v1/conversations/${inbound.body?.data?.conversation_id}`)
    const threadId = conversation.body?.data?.threads?.[0]?.id
    if (!check("a sandbox channel and an inbound conversation", sandbox.status === 201 && inbound.status === 201 && threadId !== undefined,
      `${sandbox.status} ${inbound.status} ${JSON.stringify(conversation.body)}`)) return

    const received = waitFor(channel, "message.created", (e) => JSON.stringify(e?.data ?? {}).includes(`sent ${unique}`))
    const sent = await api("POST", "/v1/messages/send", { channel_id: sandbox.body.data.id, thread_id: threadId, text: `sent ${unique}` })
    check("POST /v1/messages/send answers 201 with a sent message", sent.status === 201 && sent.body?.data?.status === "sent", `${sent.status} ${JSON.stringify(sent.body)}`)
    const event = await received
    check("the send reaches the subscriber as message.created over uWS", event?.data?.message?.id === sent.body?.data?.id && event?.company_id === companyId,
      JSON.stringify(event))

    let metrics = ""
    for (let tries = 0; tries < 30 && !metrics.includes("messages_sent_total{"); tries++) {
      if (tries > 0) await sleep(500)
      metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text(), (e) => String(e))
    }
    check("/metrics counts the send", /messages_sent_total\{[^}]*channel="msgr_b"[^}]*\} 1\b/.test(metrics) || /messages_sent_total\{[^}]*outcome="sent"[^}]*\} 1\b/.test(metrics),
      metrics.split("\n").filter((l) => l.startsWith("messages_sent_total")).join(" | ") || metrics.slice(0, 300))
  } finally {
    pusher.disconnect()
  }

  const stopAt = Date.now()
  child.kill("SIGTERM")
  const exit = await Promise.race([exited, sleep(15_000).then(() => undefined)])
  check(`SIGTERM drains and exits 0 (${((Date.now() - stopAt) / 1000).toFixed(1)} s)`, exit?.code === 0 && output.includes("shut down"),
    exit === undefined ? "still running 15 s after SIGTERM" : JSON.stringify(exit))
}

const timer = setTimeout(() => {
  console.log("FAIL container smoke: over its 4 minute budget")
  child?.kill("SIGKILL")
  process.exit(1)
}, 240_000)

try {
  if (rootfs === undefined) throw new Error("usage: node test/smoke/container-smoke.mjs ROOTFS")
  await main()
} catch (error) {
  check("container smoke ran", false, error instanceof Error ? error.message : String(error))
}
if (child !== undefined && child.exitCode === null && child.signalCode === null) {
  child.kill("SIGKILL")
  await exited
}
clearTimeout(timer)
if (counts.failed > 0) console.log(`--- server output (last 4000 chars) ---\n${output.slice(-4000)}`)
console.log(`container smoke: ${counts.passed} passed, ${counts.failed} failed`)
process.exit(counts.failed > 0 || counts.passed === 0 ? 1 : 0)

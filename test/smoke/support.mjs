// What the smoke scripts (plain Node, no test runner) share: ports, waiting, checks and JSON calls.
import { createServer } from "node:net"

export const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Counts passed and failed checks and prints one line per check. */
export const checks = () => {
  const counts = { passed: 0, failed: 0 }
  const check = (name, ok, detail) => {
    if (ok) counts.passed++
    else counts.failed++
    console.log(`${ok ? "ok  " : "FAIL"} ${name}${ok ? "" : `: ${detail}`}`)
    return ok
  }
  return { counts, check }
}

/** A fetch answering the status and the body, parsed when it is JSON. */
export const json = async (url, init = {}) => {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) })
  const text = await res.text()
  let body = text
  try {
    body = JSON.parse(text)
  } catch {}
  return { status: res.status, body }
}

/**
 * A pusher-js client of the app's gateway, authorised through `/v1/broadcasting/auth` with `token`, and a
 * subscription to `channelName`: resolves `true` once it succeeded, else why not within 15 s.
 */
export const pusherOn = (Pusher, { appKey, base, realtimePort, token }) => {
  const pusher = new Pusher(appKey, {
    cluster: "local",
    wsHost: "127.0.0.1",
    wsPort: realtimePort,
    forceTLS: false,
    enabledTransports: ["ws"],
    disableStats: true,
    channelAuthorization: { transport: "ajax", endpoint: `${base}/v1/broadcasting/auth`, headers: { authorization: `Bearer ${token}`, accept: "application/json" } }
  })
  const subscribe = (channelName) => {
    const channel = pusher.subscribe(channelName)
    const subscribed = new Promise((resolve) => {
      const timer = setTimeout(() => resolve("no pusher:subscription_succeeded within 15 s"), 15_000)
      channel.bind("pusher:subscription_succeeded", () => (clearTimeout(timer), resolve(true)))
      channel.bind("pusher:subscription_error", (error) => (clearTimeout(timer), resolve(JSON.stringify(error))))
    })
    return { channel, subscribed }
  }
  return { pusher, subscribe }
}

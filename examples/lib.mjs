// What the examples share: where the server is, the platform key, a JSON call, a fresh company, pusher-js.
import { readFileSync } from "node:fs"
import Pusher from "pusher-js"

export const API = process.env.API ?? "http://localhost:8080"
export const REALTIME = new URL(process.env.REALTIME ?? "ws://localhost:8081")
const platformKey = () => process.env.PLATFORM_API_KEY ?? readFileSync(`${process.env.DATA_DIR ?? "data"}/platform-api-key`, "utf8").trim()

/** A JSON call; throws with the answer when the status is not the expected one. */
export const call = async (token, method, path, body, expected = [200, 201]) => {
  const res = await fetch(`${API}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, accept: "application/json", ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  const text = await res.text()
  const json = text === "" ? null : JSON.parse(text)
  if (!expected.includes(res.status)) throw new Error(`${method} ${path}: ${res.status} ${text}`)
  return json
}

/** A new company with its admin; returns its id and a token of the company. */
export const newCompany = async (name = `Example ${Date.now()}`) => {
  const { data } = await call(platformKey(), "POST", "/platform/v1/companies", {
    name,
    plan: "business",
    admin: { email: `admin-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.test`, password: "password-123", name: "Ann" }
  })
  return { id: data.company.id, token: data.token }
}

/** pusher-js connected to the gateway, authorizing private channels with a token of the company. */
export const connect = (token) =>
  new Pusher(process.env.PUSHER_APP_KEY ?? "crm", {
    cluster: "local", // required by pusher-js, unused by the gateway
    wsHost: REALTIME.hostname,
    wsPort: Number(REALTIME.port),
    forceTLS: REALTIME.protocol === "wss:",
    enabledTransports: ["ws"],
    disableStats: true,
    channelAuthorization: {
      transport: "ajax",
      endpoint: `${API}/v1/broadcasting/auth`,
      headers: { authorization: `Bearer ${token}`, accept: "application/json" }
    }
  })

/** The company's private channel, once the gateway has accepted the subscription. */
export const subscribed = (pusher, companyId) => {
  const subscription = pusher.subscribe(`private-company.${companyId}`)
  return new Promise((resolve, reject) => {
    subscription.bind("pusher:subscription_succeeded", () => resolve(subscription))
    subscription.bind("pusher:subscription_error", (error) => reject(new Error(`subscription refused: ${JSON.stringify(error)}`)))
  })
}

/** The next event `key` on a subscription, as `{key, data}`; rejects after `ms`. */
export const nextEvent = (subscription, key, ms = 15_000) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${key} within ${ms / 1000} s`)), ms)
    subscription.bind(key, (envelope) => (clearTimeout(timer), resolve(keyAndData(envelope, key))))
  })

/** The key and payload of an event, whichever envelope field names the server uses. */
export const keyAndData = (envelope, fallbackKey) => ({
  key: envelope?.event ?? envelope?.type ?? fallbackKey,
  data: envelope?.data ?? envelope
})

export const until = async (what, check, ms = 30_000) => {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    const value = await check()
    if (value !== undefined && value !== false) return value
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(`timed out waiting for ${what}`)
}

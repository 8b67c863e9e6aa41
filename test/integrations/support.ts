import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { freshDatabase as ownDatabase } from "../support/Databases.ts"
import { request, type TestServer } from "../support/TestServer.ts"

export interface Received {
  readonly headers: IncomingHttpHeaders
  readonly body: string
  readonly at: number
}

export interface Receiver {
  readonly url: string
  readonly port: number
  readonly received: Array<Received>
  /** The most requests this receiver had open at once. */
  readonly maxInFlight: () => number
  /** What to answer next: a status, optionally after a delay. Default 200 at once. */
  respond: (req: Received, index: number) => { readonly status: number; readonly delayMs?: number }
  readonly close: () => Promise<void>
}

/** A real HTTP receiver on loopback recording every request it gets. */
export const startReceiver = async (): Promise<Receiver> => {
  const received: Array<Received> = []
  let inFlight = 0
  let max = 0
  const sockets = new Set<import("node:net").Socket>()
  const receiver: Receiver = {
    url: "",
    port: 0,
    received,
    maxInFlight: () => max,
    respond: () => ({ status: 200 }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      })
  }
  const server: Server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const entry = { headers: req.headers, body: Buffer.concat(chunks).toString("utf8"), at: Date.now() }
      const index = received.length
      received.push(entry)
      inFlight++
      max = Math.max(max, inFlight)
      const answer = receiver.respond(entry, index)
      const finish = () => {
        inFlight--
        if (!res.destroyed) res.writeHead(answer.status, { "content-type": "text/plain" }).end("ok")
      }
      if (answer.delayMs === undefined) finish()
      else setTimeout(finish, answer.delayMs)
    })
  })
  server.on("connection", (s) => {
    sockets.add(s)
    s.on("close", () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as AddressInfo).port
  return Object.assign(receiver, { url: `http://127.0.0.1:${port}/hook`, port })
}

export const waitFor = async <A>(what: string, probe: () => Promise<A | undefined> | A | undefined, timeoutMs = 15_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  while (true) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export const signingSecret = `whsec_${Buffer.from("0123456789abcdef0123456789abcdef").toString("base64")}`

export const webhookBody = (url: string, settings: Record<string, unknown> = {}, secrets: Record<string, unknown> = {}) => ({
  type: "webhook",
  name: "Receiver",
  status: "active",
  settings: { url, selectedEventKeys: ["message.created"], ...settings },
  secrets: { signingSecret, ...secrets }
})

export const createWebhook = async (server: TestServer, token: string, body: unknown) => {
  const res = await request(server, "POST", "/v1/integrations", { token, body })
  if (res.status !== 201) throw new Error(`createWebhook: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data
}

/**
 * A database of its own for a server whose delivery worker must be the only one: every app on a
 * database delivers for all of its integrations, and test files run in parallel against the shared one.
 * Null without DATABASE_URL (embedded PGlite is private to its server anyway).
 */
export const freshDatabase = async () => {
  const base = process.env.DATABASE_URL
  return base === undefined ? null : ownDatabase(base)
}

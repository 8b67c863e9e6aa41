import { assert, describe, it } from "@effect/vitest"
import { createServer, type Server } from "node:http"
import { unique } from "../support/Ids.ts"
import { freePort, sleep, spawnServer } from "../support/Processes.ts"
import { createCompany, request, type TestServer } from "../support/TestServer.ts"

// Real server processes (src/main.ts), on DATABASE_URL when set.

const launch = async (command: ReadonlyArray<string> | undefined, env: Record<string, string> = {}) => {
  const metricsPort = await freePort()
  const platformKey = `observability-${unique()}`
  const child = await spawnServer("observability", { METRICS_PORT: String(metricsPort), PLATFORM_API_KEY: platformKey, LOG_LEVEL: "info", ...env }, {
    readyTimeoutMs: 240_000,
    ...(command === undefined ? {} : { command })
  })
  const server: TestServer = { url: child.url, platformKey, close: async () => {} }
  return { process: child, server, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics` }
}

/** The value of the series whose name and labels are exactly these (label order as Effect writes it). */
const sample = (text: string, name: string, labels: Record<string, string>) => {
  for (const line of text.split("\n")) {
    if (Object.keys(labels).length === 0 && line.startsWith(`${name} `)) return Number(line.slice(name.length + 1))
    if (!line.startsWith(`${name}{`)) continue
    const open = line.indexOf("{")
    const close = line.lastIndexOf("}")
    const found = Object.fromEntries([...line.slice(open + 1, close).matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]))
    if (Object.entries(labels).every(([k, v]) => found[k] === v) && Object.keys(found).length === Object.keys(labels).length) {
      return Number(line.slice(close + 1).trim())
    }
  }
  return undefined
}

/** A bare OTLP/HTTP receiver: keeps every JSON body posted to /v1/traces. */
const otlpReceiver = async () => {
  const bodies: Array<any> = []
  const server: Server = createServer((req, res) => {
    let text = ""
    req.on("data", (d) => (text += d))
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/traces") bodies.push(JSON.parse(text))
      res.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  if (typeof address !== "object" || address === null) throw new Error("no port")
  const spans = () =>
    bodies.flatMap((b) => (b.resourceSpans ?? []).flatMap((rs: any) =>
      (rs.scopeSpans ?? []).flatMap((ss: any) => (ss.spans ?? []).map((span: any) => ({ span, resource: rs.resource })))))
  return { url: `http://127.0.0.1:${address.port}`, spans, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

describe("metrics and traces", () => {
  it("counts a send on /metrics (own port), a cross-tenant send as a 404 and no send, and exports spans over OTLP", async () => {
    const receiver = await otlpReceiver()
    const app = await launch(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: "crm-test" })
    try {
      const a = await createCompany(app.server)
      const b = await createCompany(app.server)
      const channel = await request(app.server, "POST", "/v1/channels", { token: a.token, body: { type: "msgr_b", provider: "sandbox", name: "metrics" } })
      assert.strictEqual(channel.status, 201, JSON.stringify(channel.body))
      const inbound = await request(app.server, "POST", `/v1/channels/${channel.body.data.id}/sandbox/inbound`, {
        token: a.token,
        body: { from: { external_id: `metrics-${unique()}`, name: "Contact" }, text: "hi" }
      })
      assert.strictEqual(inbound.status, 201, JSON.stringify(inbound.body))
      const conversation = await request(app.server, "GET", `/v1/conversations/${inbound.body.data.conversation_id}`, { token: a.token })
      const send = { channel_id: channel.body.data.id, thread_id: conversation.body.data.threads[0].id, text: "counted" }

      const before = await (await fetch(app.metricsUrl)).text()
      const sentBefore = sample(before, "messages_sent_total", { channel: "msgr_b", outcome: "sent" }) ?? 0
      const sent = await request(app.server, "POST", "/v1/messages/send", { token: a.token, body: send })
      assert.strictEqual(sent.status, 201, JSON.stringify(sent.body))
      const foreign = await request(app.server, "POST", "/v1/messages/send", { token: b.token, body: send })
      assert.strictEqual(foreign.status, 404, JSON.stringify(foreign.body))

      const response = await fetch(app.metricsUrl)
      assert.strictEqual(response.status, 200)
      assert.match(response.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/)
      const text = await response.text()
      assert.strictEqual(sample(text, "messages_sent_total", { channel: "msgr_b", outcome: "sent" }), sentBefore + 1, text)
      assert.strictEqual(sample(text, "http_requests_total", { method: "POST", route: "/v1/messages/send", status: "201" }), 1)
      assert.strictEqual(sample(text, "http_requests_total", { method: "POST", route: "/v1/messages/send", status: "404" }), 1)
      assert.strictEqual(sample(text, "http_request_duration_seconds_count", { method: "POST", route: "/v1/messages/send" }), 2)
      assert.strictEqual(sample(text, "http_request_duration_seconds_bucket", { method: "POST", route: "/v1/messages/send", le: "+Inf" }), 2)
      // Paths are labelled by their template: a conversation id never becomes a series of its own.
      assert.isDefined(sample(text, "http_requests_total", { method: "GET", route: "/v1/conversations/{id}", status: "200" }), text)
      assert.notInclude(text, `/v1/conversations/${inbound.body.data.conversation_id}`)
      assert.isDefined(sample(text, "events_unnumbered", {}), text)
      assert.isDefined(sample(text, "broadcast_recipients", { status: "pending" }), text)
      assert.isDefined(sample(text, "realtime_sockets", {}), text)
      assert.isDefined(sample(text, "webhook_outbox_pending", {}), text)
      // The API port does not serve it.
      assert.strictEqual((await fetch(`${app.server.url}/metrics`)).status, 404)

      const deadline = Date.now() + 15_000
      while (!receiver.spans().some(({ span }) => JSON.stringify(span).includes("/v1/messages/send")) && Date.now() < deadline) await sleep(200)
      const spans = receiver.spans()
      const sendSpan = spans.find(({ span }) => JSON.stringify(span).includes("/v1/messages/send"))
      assert.isDefined(sendSpan, `no span of the send among ${spans.length}: ${spans.slice(0, 5).map(({ span }) => span.name).join(", ")}`)
      assert.include(JSON.stringify(sendSpan!.resource), "crm-test")
      assert.match(sendSpan!.span.traceId, /^[0-9a-f]{32}$/)
    } finally {
      await app.process.stop()
      await receiver.close()
    }
  }, 360_000)
})

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"

/** A received upload, as the fake saw it. */
export interface FakeFile {
  readonly name: string
  readonly type: string
  readonly bytes: Uint8Array
}

/** One request as the provider fake received it: JSON, multipart and urlencoded bodies all land in `body`. */
export interface FakeRequest {
  readonly method: string
  readonly path: string
  readonly query: Record<string, string>
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: Record<string, unknown>
  readonly files: Record<string, FakeFile>
  /** When its headers arrived (epoch ms), before the body was read. */
  readonly receivedAt: number
}

export interface FakeAnswer {
  readonly status: number
  readonly body?: unknown
  readonly bytes?: Uint8Array
  readonly contentType?: string
}

/** An injected failure: an answer, or `"hang"` (never answers, to exercise time limits). */
export type Injected = FakeAnswer | "hang"

const readAll = (req: IncomingMessage) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => resolve(Buffer.concat(chunks)))
    req.on("error", reject)
  })

const parseBody = async (req: IncomingMessage, raw: Buffer) => {
  const type = req.headers["content-type"] ?? ""
  const body: Record<string, unknown> = {}
  const files: Record<string, FakeFile> = {}
  if (raw.length === 0) return { body, files }
  if (type.startsWith("application/json")) {
    Object.assign(body, JSON.parse(raw.toString("utf8")))
  } else if (type.startsWith("multipart/form-data") || type.startsWith("application/x-www-form-urlencoded")) {
    // The platform's own parser, so the fake reads multipart exactly as a standards-following server would.
    const form = await new Request("http://fake.local/", { method: "POST", headers: { "content-type": type }, body: raw }).formData()
    for (const [key, value] of form.entries()) {
      if (typeof value === "string") body[key] = value
      else files[key] = { name: value.name, type: value.type, bytes: new Uint8Array(await value.arrayBuffer()) }
    }
  }
  return { body, files }
}

/**
 * A tiny HTTP server for provider fakes: records every request, lets a test inject the
 * next answer for a route key, and hands the rest to `route`.
 */
export class FakeHttp {
  readonly requests: Array<FakeRequest> = []
  private readonly injected = new Map<string, Array<Injected>>()
  private server: Server | undefined
  private hanging: Array<ServerResponse> = []
  url = ""
  /** Every answer waits this long: a slow provider, to keep work in flight. */
  delayMs = 0

  constructor(
    private readonly keyOf: (request: FakeRequest) => string,
    private readonly route: (request: FakeRequest) => FakeAnswer | Promise<FakeAnswer>
  ) {}

  async start() {
    this.server = createServer((req, res) => {
      void this.handle(req, res).catch((error) => {
        res.writeHead(500, { "content-type": "text/plain" })
        res.end(String(error))
      })
    })
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve))
    const address = this.server.address()
    if (address === null || typeof address === "string") throw new Error("no address")
    this.url = `http://127.0.0.1:${address.port}`
    return this
  }

  async close() {
    for (const res of this.hanging) res.destroy()
    this.server?.closeAllConnections()
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve())
  }

  /** The next request whose key is `key` gets `answer` instead of the normal one. */
  inject(key: string, answer: Injected) {
    const queue = this.injected.get(key) ?? []
    queue.push(answer)
    this.injected.set(key, queue)
  }

  calls(key: string) {
    return this.requests.filter((r) => this.keyOf(r) === key)
  }

  private async handle(req: IncomingMessage, res: ServerResponse) {
    const receivedAt = Date.now()
    const raw = await readAll(req)
    const { body, files } = await parseBody(req, raw)
    const url = new URL(req.url ?? "/", "http://fake.local")
    const request: FakeRequest = {
      method: req.method ?? "GET",
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body,
      files,
      receivedAt
    }
    this.requests.push(request)
    const key = this.keyOf(request)
    const next = this.injected.get(key)?.shift()
    if (next === "hang") {
      this.hanging.push(res)
      return
    }
    const answer = next ?? (await this.route(request))
    if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs))
    if (answer.bytes !== undefined) {
      res.writeHead(answer.status, { "content-type": answer.contentType ?? "application/octet-stream" })
      res.end(Buffer.from(answer.bytes))
      return
    }
    res.writeHead(answer.status, { "content-type": answer.contentType ?? "application/json" })
    res.end(typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body ?? null))
  }
}

import { assert, describe, it } from "@effect/vitest"
import { request as httpRequest } from "node:http"
import { afterAll, beforeAll } from "vitest"
import { inspectJson } from "../../src/platform/InputHygiene.ts"
import { conversationOn, send } from "../messages/support.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

/** A request with exact bytes (fetch refuses some header values and re-encodes bodies). */
const raw = (method: string, path: string, headers: Record<string, string | Buffer>, body?: Buffer) =>
  new Promise<{ status: number; body: any }>((resolve, reject) => {
    const url = new URL(server.url + path)
    const req = httpRequest({ host: url.hostname, port: url.port, path, method, headers: headers as any }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c) => chunks.push(c))
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString()
        resolve({ status: res.statusCode ?? 0, body: text === "" ? null : JSON.parse(text) })
      })
    })
    req.on("error", reject)
    if (body !== undefined) req.write(body)
    req.end()
  })

describe("input hygiene, before any handler", () => {
  it("refuses NUL and other C0 controls in JSON strings with 422 on the field, and writes nothing", async () => {
    const company = await createCompany(server)
    const res = await request(server, "POST", "/v1/tags", { token: company.token, body: { name: "bad\u0000name" } })
    assert.strictEqual(res.status, 422)
    assert.deepStrictEqual(res.body.errors, { name: ["The name field must not contain control characters."] })
    const bell = await request(server, "POST", "/v1/tags", { token: company.token, body: { name: "ring\u0007" } })
    assert.strictEqual(bell.status, 422)
    const list = await request(server, "GET", "/v1/tags", { token: company.token })
    assert.deepStrictEqual(list.body.data, [])
    const tabbed = await request(server, "POST", "/v1/tags", { token: company.token, body: { name: "tab\tand\nnewline" } })
    assert.strictEqual(tabbed.status, 201, "tab, CR and LF are allowed")
  })

  it("refuses prototype keys, deep nesting and too many keys with 422", async () => {
    const company = await createCompany(server)
    for (const key of ["__proto__", "constructor", "prototype"]) {
      const res = await request(server, "PUT", "/v1/me/notification-preferences", {
        token: company.token,
        raw: `{"${key}": {"polluted": true}}`
      })
      assert.strictEqual(res.status, 422, key)
      assert.ok(res.body.errors[key], JSON.stringify(res.body))
    }
    const deep = await request(server, "POST", "/v1/tags", { token: company.token, raw: "[".repeat(10_000) + "]".repeat(10_000) })
    assert.strictEqual(deep.status, 422)
    assert.match(deep.body.message, /nested too deeply/)
    const wide = Object.fromEntries(Array.from({ length: 1_001 }, (_, i) => [`k${i}`, i]))
    const many = await request(server, "POST", "/v1/tags", { token: company.token, body: { name: "wide", ...wide } })
    assert.strictEqual(many.status, 422)
    assert.deepStrictEqual(many.body.errors.body, ["The request body has too many keys (at most 1000)."])
  })

  it("refuses control characters in query parameters and paths with 422, invalid UTF-8 bodies with 400", async () => {
    const company = await createCompany(server)
    const search = await request(server, "GET", "/v1/contacts?search=%00", { token: company.token })
    assert.strictEqual(search.status, 422)
    assert.deepStrictEqual(search.body.errors, { search: ["The search field must not contain control characters."] })
    const path = await request(server, "GET", "/v1/tags/1%00", { token: company.token })
    assert.strictEqual(path.status, 422)
    const bytes = await raw("POST", "/v1/tags", {
      authorization: `Bearer ${company.token}`,
      "content-type": "application/json"
    }, Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]))
    assert.strictEqual(bytes.status, 400)
    assert.deepStrictEqual(bytes.body, { message: "The request body is not valid UTF-8." })
  })

  it("accepts only 1-255 printable ASCII characters as an Idempotency-Key", async () => {
    const company = await createCompany(server)
    for (const key of [Buffer.from("a\tb"), Buffer.from([0x6b, 0xc3, 0xa9]), Buffer.from("x".repeat(256))]) {
      const res = await raw("POST", "/v1/messages/send", {
        authorization: `Bearer ${company.token}`,
        "content-type": "application/json",
        "idempotency-key": key
      }, Buffer.from(JSON.stringify({ channel_id: 1, thread_id: 1, text: "hi" })))
      assert.strictEqual(res.status, 422, key.toString("hex"))
      assert.deepStrictEqual(Object.keys(res.body.errors), ["idempotency_key"])
    }
  })

  it("keeps companies apart: a clean request for another company's tag is 404, a dirty one changes nothing", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const tag = await request(server, "POST", "/v1/tags", { token: a.token, body: { name: "mine" } })
    assert.strictEqual(tag.status, 201)
    const foreign = await request(server, "PATCH", `/v1/tags/${tag.body.data.id}`, { token: b.token, body: { name: "theirs" } })
    assert.strictEqual(foreign.status, 404)
    const dirty = await request(server, "PATCH", `/v1/tags/${tag.body.data.id}`, { token: a.token, body: { name: "x\u0000" } })
    assert.strictEqual(dirty.status, 422)
    const after = await request(server, "GET", `/v1/tags/${tag.body.data.id}`, { token: a.token })
    assert.strictEqual(after.body.data.name, "mine")
  })
})

describe("inspectJson", () => {
  it("names the path of each offending string and stops at the depth cap", () => {
    assert.deepStrictEqual(inspectJson({ a: [{ b: "ok" }, { c: "\u0000" }] }), { "a.1.c": ["The a.1.c field must not contain control characters."] })
    let nested: unknown = "deep\u0000"
    for (let i = 0; i < 40; i++) nested = [nested]
    const issues = inspectJson(nested)
    assert.deepStrictEqual(Object.values(issues).flat(), ["The request body is nested too deeply (at most 32 levels)."])
  })
})

describe("a bad send does not stall its conversation", () => {
  it("refuses a NUL-byte send at once, and the next send on the same conversation succeeds within 1 s", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const c = await conversationOn(server, company.token)
    const started = performance.now()
    const [bad, good] = await Promise.all([
      send(server, company.token, { channel_id: c.channelId, thread_id: c.threadId, text: "nul\u0000byte" }, { "idempotency-key": "nul-1" }),
      send(server, company.token, { channel_id: c.channelId, thread_id: c.threadId, text: "fine" }, { "idempotency-key": "ok-1" })
    ])
    assert.strictEqual(bad.status, 422)
    assert.deepStrictEqual(Object.keys(bad.body.errors), ["text"])
    assert.strictEqual(good.status, 201)
    assert.ok(performance.now() - started < 1_000, `took ${performance.now() - started} ms`)
    const foreign = await send(server, other.token, { channel_id: c.channelId, thread_id: c.threadId, text: "theirs" })
    assert.strictEqual(foreign.status, 404)
  })
})

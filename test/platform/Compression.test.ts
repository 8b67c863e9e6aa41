import { assert, describe, it } from "@effect/vitest"
import { request as httpRequest } from "node:http"
import { brotliDecompressSync, gunzipSync } from "node:zlib"
import { afterAll, beforeAll } from "vitest"
import { negotiate } from "../../src/platform/Compression.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

interface Raw {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  /** The bytes on the wire. */
  readonly wire: Buffer
  /** The body after undoing `content-encoding`. */
  readonly text: string
}

/** A GET whose answer is read as sent (fetch would undo the coding and hide it). */
const get = (path: string, headers: Record<string, string>) =>
  new Promise<Raw>((resolve, reject) => {
    const url = new URL(server.url + path)
    const req = httpRequest({ host: url.hostname, port: url.port, path, method: "GET", headers }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c) => chunks.push(c))
      res.on("end", () => {
        const wire = Buffer.concat(chunks)
        const coding = res.headers["content-encoding"]
        const plain = coding === "br" ? brotliDecompressSync(wire) : coding === "gzip" ? gunzipSync(wire) : wire
        resolve({ status: res.statusCode ?? 0, headers: res.headers, wire, text: plain.toString("utf8") })
      })
    })
    req.on("error", reject)
    req.end()
  })

describe("Accept-Encoding negotiation", () => {
  it("prefers br, honours q-values and *, and refuses codings at q=0", () => {
    assert.strictEqual(negotiate(undefined), undefined)
    assert.strictEqual(negotiate(""), undefined)
    assert.strictEqual(negotiate("identity"), undefined)
    assert.strictEqual(negotiate("gzip, deflate, br"), "br")
    assert.strictEqual(negotiate("gzip"), "gzip")
    assert.strictEqual(negotiate("br;q=0, gzip"), "gzip")
    assert.strictEqual(negotiate("gzip;q=0.9, br;q=0.2"), "gzip")
    assert.strictEqual(negotiate("*"), "br")
    assert.strictEqual(negotiate("*;q=0"), undefined)
    assert.strictEqual(negotiate("deflate"), undefined)
    assert.strictEqual(negotiate("GZIP ; Q=1"), "gzip")
  })
})

describe("compressed answers", () => {
  it("serves /openapi.json in br and gzip when asked, the same document as without, and says Vary", async () => {
    const plain = await get("/openapi.json", {})
    const br = await get("/openapi.json", { "accept-encoding": "br" })
    const gz = await get("/openapi.json", { "accept-encoding": "gzip" })
    assert.strictEqual(plain.status, 200)
    assert.strictEqual(plain.headers["content-encoding"], undefined)
    assert.strictEqual(plain.headers.vary, "Accept-Encoding")
    assert.strictEqual(br.headers["content-encoding"], "br")
    assert.strictEqual(gz.headers["content-encoding"], "gzip")
    assert.strictEqual(br.headers["content-length"], String(br.wire.length))
    assert.strictEqual(br.text, plain.text)
    assert.strictEqual(gz.text, plain.text)
    assert.isTrue(JSON.parse(br.text).openapi.startsWith("3."))
    assert.isBelow(br.wire.length, plain.wire.length / 5, `br ${br.wire.length} of ${plain.wire.length}`)
    assert.isBelow(gz.wire.length, plain.wire.length / 4, `gzip ${gz.wire.length} of ${plain.wire.length}`)
    // The second answer comes from the same compressed bytes.
    const again = await get("/openapi.json", { "accept-encoding": "br" })
    assert.isTrue(again.wire.equals(br.wire))
  })

  it("serves the /docs page compressed when the client accepts it, in full otherwise", async () => {
    const plain = await get("/docs", { "accept-encoding": "identity" })
    const gz = await get("/docs", { "accept-encoding": "gzip, deflate" })
    assert.strictEqual(plain.status, 200)
    assert.strictEqual(plain.headers["content-encoding"], undefined)
    assert.match(String(gz.headers["content-type"]), /^text\/html/)
    assert.strictEqual(gz.headers["content-encoding"], "gzip")
    assert.isTrue(gz.text.startsWith("<!doctype html>"))
    assert.strictEqual(gz.text, plain.text)
    assert.isBelow(gz.wire.length, plain.wire.length / 3)
  })

  it("compresses a large JSON answer of the API, leaves a small one alone, and keeps companies apart", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const names = Array.from({ length: 40 }, (_, i) => `compressed tag ${i} ${"x".repeat(40)}`)
    for (const name of names) {
      assert.strictEqual((await request(server, "POST", "/v1/tags", { token: a.token, body: { name } })).status, 201)
    }
    const auth = (token: string) => ({ authorization: `Bearer ${token}`, accept: "application/json" })
    const list = await get("/v1/tags", { ...auth(a.token), "accept-encoding": "br" })
    assert.strictEqual(list.status, 200)
    assert.strictEqual(list.headers["content-encoding"], "br")
    assert.strictEqual(list.headers["x-request-id"] !== undefined, true)
    assert.sameMembers(JSON.parse(list.text).data.map((t: { name: string }) => t.name), names)

    const small = await get("/health", { "accept-encoding": "br" })
    assert.strictEqual(small.headers["content-encoding"], undefined)
    assert.deepStrictEqual(JSON.parse(small.text), { status: "ok" })

    // Company B sees none of A's tags, compressed or not, and A's tag by id is 404 to B.
    const other = await get("/v1/tags", { ...auth(b.token), "accept-encoding": "br, gzip" })
    assert.strictEqual(other.status, 200)
    assert.deepStrictEqual(JSON.parse(other.text).data, [])
    const id = JSON.parse(list.text).data[0].id
    const foreign = await get(`/v1/tags/${id}`, { ...auth(b.token), "accept-encoding": "br" })
    assert.strictEqual(foreign.status, 404)
    assert.deepStrictEqual(Object.keys(JSON.parse(foreign.text)), ["message"])
  })
})

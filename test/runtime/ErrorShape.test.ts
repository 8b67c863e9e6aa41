import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { createCompany, request, startServer, type TestServer } from "../support/TestServer.ts"

let server: TestServer
let company: Awaited<ReturnType<typeof createCompany>>
beforeAll(async () => {
  server = await startServer()
  company = await createCompany(server)
})
afterAll(() => server?.close())

const isJson = (headers: Headers) => (headers.get("content-type") ?? "").startsWith("application/json")

describe("one error shape for every failure", () => {
  it("answers malformed JSON with 400 {message}", async () => {
    for (const raw of ["{not json", "{\"name\": \"a\",}", "", "[1, 2"]) {
      const res = await request(server, "POST", "/platform/v1/companies", { token: server.platformKey, raw })
      if (raw === "") {
        assert.strictEqual(res.status, 422, JSON.stringify(res.body))
        continue
      }
      assert.strictEqual(res.status, 400, `${raw}: ${JSON.stringify(res.body)}`)
      assert.ok(isJson(res.headers))
      assert.deepStrictEqual(res.body, { message: "The request body must be valid JSON." })
    }
    const me = await request(server, "POST", "/v1/me", { token: company.token, raw: "{\"name\":" })
    assert.strictEqual(me.status, 400, JSON.stringify(me.body))
  })

  it("answers a body of another content type with 415 {message} in JSON", async () => {
    const res = await request(server, "POST", "/platform/v1/companies", {
      token: server.platformKey,
      raw: "name=x",
      headers: { "content-type": "text/plain" }
    })
    assert.strictEqual(res.status, 415, JSON.stringify(res.body))
    assert.ok(isJson(res.headers))
    assert.strictEqual(res.body.message, "The request body must be JSON (Content-Type: application/json).")
    const xml = await request(server, "POST", "/v1/me", { token: company.token, raw: "<me/>", headers: { "content-type": "application/xml" } })
    assert.strictEqual(xml.status, 415, JSON.stringify(xml.body))
  })

  it("answers a wrong method on a known path with 405 {message} and Allow", async () => {
    const health = await request(server, "DELETE", "/health")
    assert.strictEqual(health.status, 405, JSON.stringify(health.body))
    assert.ok(isJson(health.headers))
    assert.strictEqual(health.headers.get("allow"), "GET, HEAD")
    assert.strictEqual(health.body.message, "The DELETE method is not supported for route health. Supported methods: GET, HEAD.")
    const me = await request(server, "DELETE", "/v1/me", { token: company.token })
    assert.strictEqual(me.status, 405, JSON.stringify(me.body))
    const allow = (me.headers.get("allow") ?? "").split(", ")
    assert.deepStrictEqual(allow, ["GET", "HEAD", "POST"])
    const unknown = await request(server, "DELETE", "/v1/no-such-thing", { token: company.token })
    assert.strictEqual(unknown.status, 404)
  })

  it("speaks to the user in validation messages, never in schema text", async () => {
    const res = await request(server, "POST", "/platform/v1/companies", {
      token: server.platformKey,
      body: { name: 5, plan: "gold", admin: { email: null, password: 7, name: ["x"] } }
    })
    assert.strictEqual(res.status, 422)
    const messages = Object.values(res.body.errors as Record<string, Array<string>>).flat()
    assert.isAbove(messages.length, 2)
    for (const message of messages) {
      assert.notMatch(message, /expected |Expected |\||undefined|Schema|<|>/, message)
      assert.match(message, /^The .+\.$/, message)
    }
    const me = await request(server, "POST", "/v1/me", { token: company.token, body: { name: 12, phone: false } })
    assert.strictEqual(me.status, 422, JSON.stringify(me.body))
    for (const message of Object.values(me.body.errors as Record<string, Array<string>>).flat()) {
      assert.notMatch(message, /expected |Expected |\||undefined/, message)
      assert.match(message, /^The .+\.$/, message)
    }
  })
})

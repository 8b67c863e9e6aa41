import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { createCompany, request, startServer, type TestServer } from "../support/TestServer.ts"

let server: TestServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

describe("kernel", () => {
  it("answers /health and /ready", async () => {
    const health = await request(server, "GET", "/health")
    assert.strictEqual(health.status, 200)
    assert.deepStrictEqual(health.body, { status: "ok" })
    const ready = await request(server, "GET", "/ready")
    assert.strictEqual(ready.status, 200)
    assert.deepStrictEqual(ready.body.telephony, { pbx: "in-process" })
    assert.ok(health.headers.get("x-request-id"))
  })

  it("echoes a sane X-Request-Id and replaces a bad one", async () => {
    const good = await request(server, "GET", "/health", { headers: { "x-request-id": "abc-123" } })
    assert.strictEqual(good.headers.get("x-request-id"), "abc-123")
    const bad = await request(server, "GET", "/health", { headers: { "x-request-id": "bad id with spaces" } })
    assert.notStrictEqual(bad.headers.get("x-request-id"), "bad id with spaces")
  })

  it("documents the bearer scheme so that API tools offer Authorization: Bearer", async () => {
    const doc = await request(server, "GET", "/openapi.json")
    assert.strictEqual(doc.status, 200)
    assert.deepStrictEqual(Object.values(doc.body.components.securitySchemes).map((s: any) => [s.type, s.scheme]), [["http", "bearer"]])
  })

  it("answers unknown routes with a JSON 404", async () => {
    const res = await request(server, "GET", "/v1/nothing-here")
    assert.strictEqual(res.status, 404)
    assert.strictEqual(res.body.message, "The route v1/nothing-here could not be found.")
  })

  it("answers 401 {message:'Unauthenticated.'} for every bad credential shape", async () => {
    const company = await createCompany(server)
    const [id] = company.token.split("|")
    const cases: Array<Record<string, string>> = [
      {},
      { authorization: "Bearer" },
      { authorization: "Bearer nonsense" },
      { authorization: `Bearer ${id}|wrongsecretwrongsecretwrongsecret` },
      { authorization: "Bearer 999999999|abcdefghijklmnopqrstuvwxyz0123456789ABCD" },
      { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` },
      { cookie: "crm_session=not-a-session-id-but-long-enough" }
    ]
    for (const headers of cases) {
      const res = await request(server, "GET", "/v1/me", { headers })
      assert.strictEqual(res.status, 401, JSON.stringify(headers))
      assert.deepStrictEqual(res.body, { message: "Unauthenticated." })
    }
  })

  it("serves /v1/me with the service account's permissions and rate-limit headers", async () => {
    const company = await createCompany(server)
    const res = await request(server, "GET", "/v1/me", { token: company.token })
    assert.strictEqual(res.status, 200)
    assert.strictEqual(res.body.data.current_company_id, company.id)
    assert.deepStrictEqual(res.body.data.roles, ["admin"])
    assert.ok(res.body.data.permissions.includes("company_telephony.manage"))
    assert.ok(res.body.data.permissions.includes("api_token.create"))
    assert.strictEqual(res.headers.get("x-ratelimit-limit"), "3000")
    assert.strictEqual(res.headers.get("x-ratelimit-remaining"), "2999")
  })

  it("keeps companies apart: another company's platform record needs the platform key", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const res = await request(server, "GET", "/v1/me", { token: b.token })
    assert.strictEqual(res.body.data.current_company_id, b.id)
    assert.notStrictEqual(a.id, b.id)
    const foreign = await request(server, "GET", `/platform/v1/companies/${a.id}`, { token: b.token })
    assert.strictEqual(foreign.status, 401)
  })

  it("turns malformed bodies into 400 and mistyped ones into 422 with field paths", async () => {
    const garbage = await request(server, "POST", "/platform/v1/companies", { token: server.platformKey, raw: "{not json" })
    assert.strictEqual(garbage.status, 400)
    assert.deepStrictEqual(garbage.body, { message: "The request body must be valid JSON." })
    const typed = await request(server, "POST", "/platform/v1/companies", {
      token: server.platformKey,
      body: { name: 5, admin: { email: "nope", password: "x" } }
    })
    assert.strictEqual(typed.status, 422)
    assert.ok(typed.body.errors["name"], JSON.stringify(typed.body))
    assert.ok(typed.body.errors["admin.email"], JSON.stringify(typed.body))
    assert.ok(typed.body.errors["admin.name"], JSON.stringify(typed.body))
    assert.strictEqual(typeof typed.body.message, "string")
  })

  it("answers 413 for a body over the limit", async () => {
    const res = await request(server, "POST", "/platform/v1/companies", {
      token: server.platformKey,
      raw: JSON.stringify({ name: "x".repeat(2 * 1024 * 1024) })
    })
    assert.strictEqual(res.status, 413)
    assert.strictEqual(res.body.message, "Payload too large.")
  })
})

import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { Passwords } from "../../src/auth/Passwords.ts"
import { uniqueEmail } from "../support/Ids.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const platform = (method: string, path: string, body?: unknown) =>
  request(server, method, `/platform/v1${path}`, { token: server.platformKey, body })

const passwordMatches = (userId: number, password: string) =>
  server.runInApp(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ password_hash: string | null }>`SELECT password_hash FROM users WHERE id = ${userId}`
    return yield* Passwords.use((p) => p.verify(row.password_hash, password))
  }))

const personalToken = async (email: string, password = "password-123") => {
  const res = await request(server, "POST", "/v1/auth/mobile/login", { body: { email, password, device_name: "test" } })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.token as string
}

describe("platform API", () => {
  it("creates a company on the free plan by default with a working admin token", async () => {
    const email = uniqueEmail("owner")
    const res = await platform("POST", "/companies", {
      name: "Acme",
      admin: { email, password: "password-123", name: "Ann" }
    })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    const { company, admin, token } = res.body.data
    assert.deepStrictEqual(Object.keys(res.body.data).sort(), ["admin", "company", "token"])
    assert.deepStrictEqual(Object.keys(company).sort(), ["created_at", "default_country", "default_currency", "id", "name", "plan", "status", "telephony_enabled"])
    assert.strictEqual(company.name, "Acme")
    assert.strictEqual(company.plan, "free")
    assert.strictEqual(company.default_currency, null)
    assert.strictEqual(company.telephony_enabled, false)
    assert.ok(!Number.isNaN(Date.parse(company.created_at)))
    assert.deepStrictEqual(Object.keys(admin).sort(), ["email", "id"])
    assert.strictEqual(admin.email, email)
    assert.match(token, /^\d+\|[A-Za-z0-9]{40}$/)

    const me = await request(server, "GET", "/v1/me", { token })
    assert.strictEqual(me.status, 200)
    assert.strictEqual(me.body.data.current_company_id, company.id)
    assert.strictEqual(me.body.data.is_service_account, true)
    assert.notStrictEqual(me.body.data.id, admin.id)
    assert.ok(await passwordMatches(admin.id, "password-123"))

    const person = await request(server, "GET", "/v1/me", { token: await personalToken(email) })
    assert.strictEqual(person.body.data.id, admin.id)
    assert.strictEqual(person.body.data.email, email)
    assert.strictEqual(person.body.data.current_company_id, company.id)
    assert.deepStrictEqual(person.body.data.roles, ["admin"])
  })

  it("takes plan, currency and telephony on create", async () => {
    const res = await platform("POST", "/companies", {
      name: "Big",
      plan: "pro",
      default_currency: "EUR",
      telephony_enabled: true,
      admin: { email: uniqueEmail("big"), password: "password-123", name: "B" }
    })
    assert.strictEqual(res.status, 201)
    assert.strictEqual(res.body.data.company.plan, "pro")
    assert.strictEqual(res.body.data.company.default_currency, "EUR")
    assert.strictEqual(res.body.data.company.telephony_enabled, true)
  })

  it("refuses a missing or wrong platform key, and tenant tokens", async () => {
    const company = await createCompany(server)
    const body = { name: "x", admin: { email: uniqueEmail("k"), password: "password-123", name: "x" } }
    for (const token of [undefined, "wrong-key", `${server.platformKey}x`, company.token]) {
      for (const [method, path] of [["POST", "/companies"], ["GET", `/companies/${company.id}`], ["PATCH", `/companies/${company.id}`], ["POST", `/companies/${company.id}/users`]]) {
        const res = await request(server, method, `/platform/v1${path}`, { token, body: method === "GET" ? undefined : body })
        assert.strictEqual(res.status, 401, `${token} ${method} ${path}`)
        assert.deepStrictEqual(res.body, { message: "Unauthenticated." })
      }
    }
    const unchanged = await platform("GET", `/companies/${company.id}`)
    assert.notStrictEqual(unchanged.body.data.name, "x")
  })

  it("reads and updates a company; an unknown id is 404", async () => {
    const company = await createCompany(server)
    const got = await platform("GET", `/companies/${company.id}`)
    assert.strictEqual(got.status, 200)
    assert.strictEqual(got.body.data.id, company.id)
    assert.strictEqual(got.body.data.plan, "business")

    const patched = await platform("PATCH", `/companies/${company.id}`, { name: "Renamed", plan: "pro", default_currency: "USD" })
    assert.strictEqual(patched.status, 200, JSON.stringify(patched.body))
    assert.strictEqual(patched.body.data.name, "Renamed")
    assert.strictEqual(patched.body.data.plan, "pro")
    assert.strictEqual(patched.body.data.default_currency, "USD")
    const cleared = await platform("PATCH", `/companies/${company.id}`, { default_currency: null })
    assert.strictEqual(cleared.body.data.default_currency, null)
    assert.strictEqual(cleared.body.data.name, "Renamed")
    const noop = await platform("PATCH", `/companies/${company.id}`, {})
    assert.strictEqual(noop.status, 200)
    assert.strictEqual(noop.body.data.name, "Renamed")
    assert.strictEqual((await platform("GET", `/companies/${company.id}`)).body.data.plan, "pro")

    for (const [method, path, body] of [
      ["GET", "/companies/999999999", undefined],
      ["PATCH", "/companies/999999999", { name: "x" }],
      ["PATCH", "/companies/999999999", {}],
      ["POST", "/companies/999999999/users", { email: uniqueEmail("n"), password: "password-123", name: "n", role: "agent" }]
    ] as const) {
      const res = await platform(method, path, body)
      assert.strictEqual(res.status, 404, `${method} ${path}`)
      assert.deepStrictEqual(res.body, { message: "Company not found." })
    }
    for (const id of ["abc", "1.5", "99999999999999999999"]) {
      const res = await platform("GET", `/companies/${id}`)
      assert.ok(res.status === 404 || res.status === 422, `${id} -> ${res.status}`)
    }
  })

  it("keeps companies apart: updating one company leaves another untouched", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    await platform("PATCH", `/companies/${a.id}`, { name: "Only A", plan: "free" })
    const other = await platform("GET", `/companies/${b.id}`)
    assert.notStrictEqual(other.body.data.name, "Only A")
    assert.strictEqual(other.body.data.plan, "business")
    // A's token still lands in A, B's in B.
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: a.token })).body.data.current_company_id, a.id)
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: b.token })).body.data.current_company_id, b.id)
  })

  it("applies a plan change to feature gates at once", async () => {
    const company = await createCompany(server, { plan: "free" })
    const gated = await request(server, "GET", "/v1/api-tokens", { token: company.token })
    assert.strictEqual(gated.status, 403)
    assert.strictEqual(gated.body.error, "feature_not_available")
    await platform("PATCH", `/companies/${company.id}`, { plan: "business" })
    const open = await request(server, "GET", "/v1/api-tokens", { token: company.token })
    assert.strictEqual(open.status, 200)
    await platform("PATCH", `/companies/${company.id}`, { plan: "free" })
    const closed = await request(server, "GET", "/v1/api-tokens", { token: company.token })
    assert.strictEqual(closed.status, 403)
    assert.strictEqual(closed.body.required_plan, "business")
  })

  it("adds a new user with a role", async () => {
    const company = await createCompany(server)
    const email = uniqueEmail("agent")
    const res = await platform("POST", `/companies/${company.id}/users`, { email, password: "password-456", name: "Al", role: "agent" })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.deepStrictEqual(Object.keys(res.body.data), ["user"])
    assert.deepStrictEqual(Object.keys(res.body.data.user).sort(), ["email", "id"])
    assert.strictEqual(res.body.data.user.email, email)
    assert.ok(await passwordMatches(res.body.data.user.id, "password-456"))
    const me = await request(server, "GET", "/v1/me", { token: await personalToken(email, "password-456") })
    assert.strictEqual(me.body.data.current_company_id, company.id)
    assert.deepStrictEqual(me.body.data.roles, ["agent"])
    assert.strictEqual(me.body.data.is_service_account, false)
  })

  it("adds an existing account to another company without touching its password or active company", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const res = await platform("POST", `/companies/${b.id}/users`, {
      email: a.admin.email.toUpperCase(),
      password: "another-password",
      name: "Someone else",
      role: "manager"
    })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.user.id, a.admin.id)
    assert.ok(await passwordMatches(a.admin.id, "password-123"))
    assert.ok(!(await passwordMatches(a.admin.id, "another-password")))
    const memberships = await server.runInApp(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ company_id: number; role: string }>`
        SELECT company_id, role FROM memberships WHERE user_id = ${a.admin.id} ORDER BY company_id`
    }))
    assert.deepStrictEqual(memberships.map((m) => [m.company_id, m.role]), [[a.id, "admin"], [b.id, "manager"]])
    const me = await request(server, "GET", "/v1/me", { token: await personalToken(a.admin.email) })
    assert.strictEqual(me.body.data.current_company_id, a.id)
    assert.strictEqual(me.body.data.name, "Admin")

    // Adding again changes the role rather than failing.
    const again = await platform("POST", `/companies/${b.id}/users`, {
      email: a.admin.email,
      password: "password-123",
      name: "x",
      role: "agent"
    })
    assert.strictEqual(again.status, 201)
    const roles = await server.runInApp(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ role: string }>`SELECT role FROM memberships WHERE user_id = ${a.admin.id} AND company_id = ${b.id}`
    }))
    assert.deepStrictEqual(roles.map((r) => r.role), ["agent"])
  })

  it("answers bad input with 422 and field paths", async () => {
    const company = await createCompany(server)
    const cases: Array<[string, string, { body?: unknown; raw?: string }, ReadonlyArray<string>]> = [
      ["POST", "/companies", { raw: "{not json" }, ["body"]],
      ["POST", "/companies", { body: [] }, ["body"]],
      ["POST", "/companies", { body: {} }, ["name", "admin"]],
      ["POST", "/companies", {
        body: { name: "", plan: "enterprise", default_currency: "euro", admin: { email: "nope", password: "short", name: "" } }
      }, ["name", "plan", "default_currency", "admin.email", "admin.password", "admin.name"]],
      ["POST", "/companies", { body: { name: "x", telephony_enabled: "yes", admin: { email: "a@b.cd", password: "password-123", name: "x" } } }, ["telephony_enabled"]],
      ["PATCH", `/companies/${company.id}`, { body: { plan: "gold" } }, ["plan"]],
      ["PATCH", `/companies/${company.id}`, { body: { name: 5 } }, ["name"]],
      ["POST", `/companies/${company.id}/users`, { body: { email: "x@y.zz", password: "password-123", name: "x", role: "owner" } }, ["role"]],
      ["POST", `/companies/${company.id}/users`, { body: { email: "x@y.zz", password: "password-123", name: "x" } }, ["role"]],
      ["POST", `/companies/${company.id}/users`, { body: { email: "bad", password: "1", name: "x", role: "agent" } }, ["email", "password"]]
    ]
    for (const [method, path, options, fields] of cases) {
      const res = await request(server, method, `/platform/v1${path}`, { token: server.platformKey, ...options })
      if (options.raw !== undefined) {
        // Malformed JSON is 400 {message}, not a field error.
        assert.deepStrictEqual([res.status, res.body], [400, { message: "The request body must be valid JSON." }])
        continue
      }
      assert.strictEqual(res.status, 422, `${method} ${path} ${JSON.stringify(options)} -> ${res.status} ${JSON.stringify(res.body)}`)
      assert.strictEqual(typeof res.body.message, "string")
      for (const field of fields) {
        assert.ok(Array.isArray(res.body.errors?.[field]), `${field} in ${JSON.stringify(res.body)}`)
      }
    }
    const unchanged = await platform("GET", `/companies/${company.id}`)
    assert.strictEqual(unchanged.body.data.plan, "business")
  })
})

import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { uniqueEmail } from "../support/Ids.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { addUser, emitEvent, mobileLogin } from "./support.ts"

const failed = "These credentials do not match our records."

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const assertLoginRefused = (res: { status: number; body: any }, label: string) => {
  assert.strictEqual(res.status, 422, `${label}: ${JSON.stringify(res.body)}`)
  assert.deepStrictEqual(res.body.errors, { email: [failed] }, label)
  assert.strictEqual(res.body.message, failed, label)
  assert.strictEqual(res.body.data?.token, undefined, label)
}

describe("mobile login", () => {
  it("returns a bearer token named mobile:<device> that works on /v1/me", async () => {
    const company = await createCompany(server)
    const res = await mobileLogin(server, company.admin.email, company.admin.password, "Pixel 8")
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.message, "Logged in.")
    assert.strictEqual(res.body.data.email_verified, false)
    assert.match(res.body.data.token, /^\d+\|[A-Za-z0-9]{40}$/)
    const me = await request(server, "GET", "/v1/me", { token: res.body.data.token })
    assert.strictEqual(me.status, 200)
    assert.strictEqual(me.body.data.id, company.admin.id)
    assert.strictEqual(me.body.data.current_company_id, company.id)
    assert.deepStrictEqual(me.body.data.roles, ["admin"])
    const [row] = await query(server, "SELECT name, kind, abilities FROM api_tokens WHERE id = $1", [
      Number(res.body.data.token.split("|")[0])
    ])
    assert.strictEqual(row.name, "mobile:Pixel 8")
    assert.strictEqual(row.kind, "mobile")
    assert.deepStrictEqual(row.abilities, ["*", "broadcasting:connect"])
  })

  it("matches the e-mail case-insensitively", async () => {
    const company = await createCompany(server)
    const res = await mobileLogin(server, company.admin.email.toUpperCase(), company.admin.password)
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  })

  it("refuses a wrong password, an unknown e-mail, a service account and a user without company with one 422 on email", async () => {
    const company = await createCompany(server)
    assertLoginRefused(await mobileLogin(server, company.admin.email, "wrong-password"), "wrong password")
    assertLoginRefused(await mobileLogin(server, uniqueEmail("nobody"), "password-123"), "unknown e-mail")

    // A service account that somehow has an e-mail and a password still cannot log in.
    const serviceEmail = uniqueEmail("service")
    await query(
      server,
      `UPDATE users SET email = $1, password_hash = (SELECT password_hash FROM users WHERE id = $2)
       WHERE id = (SELECT user_id FROM api_tokens WHERE id = $3)`,
      [serviceEmail, company.admin.id, Number(company.token.split("|")[0])]
    )
    assertLoginRefused(await mobileLogin(server, serviceEmail, "password-123"), "service account")

    const loner = await addUser(server, company.id)
    await query(server, "DELETE FROM memberships WHERE user_id = $1", [loner.id])
    assertLoginRefused(await mobileLogin(server, loner.email, loner.password), "no membership")

    const tokens = await query(server, "SELECT count(*)::int AS n FROM api_tokens WHERE user_id = $1 AND kind = 'mobile'", [
      loner.id
    ])
    assert.strictEqual(tokens[0].n, 0)
  })

  it("validates device_name, email and password", async () => {
    const company = await createCompany(server)
    const missing = await request(server, "POST", "/v1/auth/mobile/login", {
      body: { email: company.admin.email, password: company.admin.password }
    })
    assert.strictEqual(missing.status, 422)
    assert.ok(missing.body.errors.device_name, JSON.stringify(missing.body))
    const tooLong = await mobileLogin(server, company.admin.email, company.admin.password, "x".repeat(101))
    assert.strictEqual(tooLong.status, 422)
    assert.deepStrictEqual(tooLong.body.errors.device_name, ["The device name field must not be greater than 100 characters."])
    const longest = await mobileLogin(server, company.admin.email, company.admin.password, "x".repeat(100))
    assert.strictEqual(longest.status, 200)
    const empty = await request(server, "POST", "/v1/auth/mobile/login", { body: { email: "", password: "", device_name: "" } })
    assert.strictEqual(empty.status, 422)
    assert.ok(empty.body.errors.email && empty.body.errors.password && empty.body.errors.device_name, JSON.stringify(empty.body))
    const garbage = await request(server, "POST", "/v1/auth/mobile/login", { raw: "{nope" })
    assert.strictEqual(garbage.status, 400)
  })

  it("revokes the earlier token of the same device at once, and keeps other devices", async () => {
    const company = await createCompany(server)
    const first = await mobileLogin(server, company.admin.email, company.admin.password, "phone")
    const tablet = await mobileLogin(server, company.admin.email, company.admin.password, "tablet")
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: first.body.data.token })).status, 200)
    const second = await mobileLogin(server, company.admin.email, company.admin.password, "phone")
    assert.strictEqual(second.status, 200)
    const stale = await request(server, "GET", "/v1/me", { token: first.body.data.token })
    assert.strictEqual(stale.status, 401)
    assert.deepStrictEqual(stale.body, { message: "Unauthenticated." })
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: second.body.data.token })).status, 200)
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: tablet.body.data.token })).status, 200)
  })

  it("answers the sixth attempt in the window with 429, retry_after and Retry-After (default 5 per 900 s)", async () => {
    const company = await createCompany(server)
    for (let attempt = 1; attempt <= 5; attempt++) {
      const res = await mobileLogin(server, company.admin.email, attempt === 3 ? company.admin.password : "wrong-password")
      assert.strictEqual(res.status, attempt === 3 ? 200 : 422, `attempt ${attempt}`)
    }
    // Every attempt counts, so even the right password is refused now.
    const sixth = await mobileLogin(server, company.admin.email.toUpperCase(), company.admin.password)
    assert.strictEqual(sixth.status, 429)
    assert.strictEqual(sixth.body.message, "Too Many Requests.")
    assert.ok(Number.isInteger(sixth.body.retry_after) && sixth.body.retry_after > 0 && sixth.body.retry_after <= 900)
    assert.strictEqual(sixth.headers.get("retry-after"), String(sixth.body.retry_after))
    // The bucket is this e-mail (and IP): another account is untouched.
    const other = await addUser(server, company.id)
    assert.strictEqual((await mobileLogin(server, other.email, other.password)).status, 200)
  })

  it("follows current_company_id and keeps each company's data apart", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    await addUser(server, b.id, { email: a.admin.email, role: "agent" })
    await emitEvent(server, a.id, "test.marker", { company: "a" })
    await emitEvent(server, b.id, "test.marker", { company: "b" })

    const login = await mobileLogin(server, a.admin.email, a.admin.password)
    const token = login.body.data.token
    const eventsOf = async () => {
      const res = await request(server, "GET", "/v1/events", { token })
      assert.strictEqual(res.status, 200, JSON.stringify(res.body))
      return res.body.data.items.map((e: any) => e.company_id)
    }
    assert.strictEqual((await request(server, "GET", "/v1/me", { token })).body.data.current_company_id, a.id)
    assert.deepStrictEqual([...new Set(await eventsOf())], [a.id])

    // Switched through the API: the credential this runner resolved a moment ago is dropped at once.
    const switched = await request(server, "PUT", "/v1/me/current-company", { token, body: { company_id: b.id } })
    assert.strictEqual(switched.status, 200, JSON.stringify(switched.body))
    const me = await request(server, "GET", "/v1/me", { token })
    assert.strictEqual(me.body.data.current_company_id, b.id)
    assert.deepStrictEqual(me.body.data.roles, ["agent"])
    assert.deepStrictEqual([...new Set(await eventsOf())], [b.id])

    // B's own admin never sees A's events.
    const bLogin = await mobileLogin(server, b.admin.email, b.admin.password)
    const bEvents = await request(server, "GET", "/v1/events", { token: bLogin.body.data.token })
    assert.ok(bEvents.body.data.items.every((e: any) => e.company_id === b.id))
  })

  it("points a stale current company at a company the user still belongs to", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const user = await addUser(server, a.id)
    await addUser(server, b.id, { email: user.email, role: "manager" })
    await query(server, "DELETE FROM memberships WHERE user_id = $1 AND company_id = $2", [user.id, a.id])
    const login = await mobileLogin(server, user.email, user.password)
    assert.strictEqual(login.status, 200)
    const me = await request(server, "GET", "/v1/me", { token: login.body.data.token })
    assert.strictEqual(me.body.data.current_company_id, b.id)
    assert.deepStrictEqual(me.body.data.roles, ["manager"])
  })

  it("logout with a mobile token revokes that token only", async () => {
    const company = await createCompany(server)
    const phone = await mobileLogin(server, company.admin.email, company.admin.password, "phone")
    const tablet = await mobileLogin(server, company.admin.email, company.admin.password, "tablet")
    const out = await request(server, "POST", "/v1/auth/logout", { token: phone.body.data.token })
    assert.strictEqual(out.status, 200)
    assert.deepStrictEqual(out.body, { data: { message: "Logged out." } })
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: phone.body.data.token })).status, 401)
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: tablet.body.data.token })).status, 200)
    // A company's service token is not a personal credential: logout does not revoke it.
    const service = await request(server, "POST", "/v1/auth/logout", { token: company.token })
    assert.strictEqual(service.status, 403)
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: company.token })).status, 200)
  })
})

describe("login throttle with a test-sized window", () => {
  let small: RunningServer
  beforeAll(async () => {
    small = await startServer({ loginAttempts: 2, loginWindowSeconds: 2 })
  })
  afterAll(() => small?.close())

  it("honours LOGIN_ATTEMPTS / LOGIN_WINDOW_SECONDS and lets the caller in again after the window", async () => {
    const company = await createCompany(small)
    assert.strictEqual((await mobileLogin(small, company.admin.email, "wrong-password")).status, 422)
    assert.strictEqual((await mobileLogin(small, company.admin.email, "wrong-password")).status, 422)
    const third = await mobileLogin(small, company.admin.email, company.admin.password)
    assert.strictEqual(third.status, 429)
    assert.ok(third.body.retry_after >= 1 && third.body.retry_after <= 2, JSON.stringify(third.body))
    await new Promise((resolve) => setTimeout(resolve, third.body.retry_after * 1000 + 200))
    assert.strictEqual((await mobileLogin(small, company.admin.email, company.admin.password)).status, 200)
  })
})

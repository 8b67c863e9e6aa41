import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { addUser, cookieHeader, emitEvent, mobileLogin, setCookies } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const csrfCookie = async (target: RunningServer, cookies: Record<string, string> = {}) => {
  const res = await request(target, "GET", "/sanctum/csrf-cookie", { headers: { cookie: cookieHeader(cookies) } })
  assert.strictEqual(res.status, 204)
  const xsrf = setCookies(res).get("XSRF-TOKEN")
  assert.ok(xsrf, "XSRF-TOKEN cookie set")
  return xsrf
}

/** csrf-cookie then login: the browser's cookie jar afterwards. */
const sessionLogin = async (email: string, password: string) => {
  const xsrf = await csrfCookie(server)
  const res = await request(server, "POST", "/v1/auth/login", {
    body: { email, password },
    headers: { cookie: cookieHeader({ "XSRF-TOKEN": xsrf.value }), "x-xsrf-token": xsrf.value }
  })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  const cookies = setCookies(res)
  return {
    res,
    preLoginXsrf: xsrf.value,
    session: cookies.get("crm_session")!,
    xsrf: cookies.get("XSRF-TOKEN")!
  }
}

describe("session mode", () => {
  it("sets a readable, Lax XSRF-TOKEN cookie", async () => {
    const xsrf = await csrfCookie(server)
    assert.match(xsrf.value, /^[A-Za-z0-9]{40}$/)
    assert.match(xsrf.raw, /Path=\//)
    assert.match(xsrf.raw, /SameSite=Lax/i)
    assert.notMatch(xsrf.raw, /HttpOnly/i)
    assert.notMatch(xsrf.raw, /Secure/i)
    assert.notStrictEqual((await csrfCookie(server)).value, xsrf.value)
  })

  it("refuses a login without the double-submitted anti-forgery token with 419", async () => {
    const company = await createCompany(server)
    const xsrf = await csrfCookie(server)
    const body = { email: company.admin.email, password: company.admin.password }
    const cases: Array<Record<string, string>> = [
      {},
      { cookie: cookieHeader({ "XSRF-TOKEN": xsrf.value }) },
      { "x-xsrf-token": xsrf.value },
      { cookie: cookieHeader({ "XSRF-TOKEN": xsrf.value }), "x-xsrf-token": `${xsrf.value.slice(1)}x` },
      { cookie: cookieHeader({ "XSRF-TOKEN": "short" }), "x-xsrf-token": "short" }
    ]
    for (const headers of cases) {
      const res = await request(server, "POST", "/v1/auth/login", { body, headers })
      assert.strictEqual(res.status, 419, JSON.stringify(headers))
      assert.deepStrictEqual(res.body, { message: "CSRF token mismatch." })
      assert.strictEqual(setCookies(res).get("crm_session"), undefined)
    }
  })

  it("logs in with cookies only, then serves GET with the cookie and guards POST with X-XSRF-TOKEN", async () => {
    const company = await createCompany(server)
    const { res, preLoginXsrf, session, xsrf } = await sessionLogin(company.admin.email, company.admin.password)
    assert.deepStrictEqual(res.body, {
      data: { message: "Logged in.", user: { id: company.admin.id, email: company.admin.email, name: "Admin" } }
    })
    assert.match(session.raw, /HttpOnly/i)
    assert.match(session.raw, /SameSite=Lax/i)
    assert.match(session.raw, /Path=\//)
    assert.match(session.value, /^[A-Za-z0-9]{48}$/)
    assert.notMatch(xsrf.raw, /HttpOnly/i)
    assert.notStrictEqual(xsrf.value, preLoginXsrf)
    const [row] = await query(server, "SELECT user_id, csrf_token, expires_at FROM sessions WHERE id = $1", [session.value])
    assert.strictEqual(row.user_id, company.admin.id)
    assert.strictEqual(row.csrf_token, xsrf.value)
    const ttl = new Date(row.expires_at).getTime() - Date.now()
    assert.ok(ttl > 7_100_000 && ttl <= 7_200_000, String(ttl))

    const cookie = cookieHeader({ crm_session: session.value, "XSRF-TOKEN": xsrf.value })
    const me = await request(server, "GET", "/v1/me", { headers: { cookie } })
    assert.strictEqual(me.status, 200, JSON.stringify(me.body))
    assert.strictEqual(me.body.data.id, company.admin.id)
    assert.strictEqual(me.body.data.current_company_id, company.id)

    const post = (headers: Record<string, string>) =>
      request(server, "POST", "/v1/auth/email/resend-code", { headers: { cookie, ...headers } })
    const without = await post({})
    assert.strictEqual(without.status, 419)
    assert.deepStrictEqual(without.body, { message: "CSRF token mismatch." })
    assert.strictEqual((await post({ "x-xsrf-token": preLoginXsrf })).status, 419)
    const right = await post({ "x-xsrf-token": xsrf.value })
    assert.strictEqual(right.status, 200, JSON.stringify(right.body))

    // Asking for the cookie again during the session hands back the session's own token.
    assert.strictEqual((await csrfCookie(server, { crm_session: session.value })).value, xsrf.value)
  })

  it("logout deletes the session and clears the cookies", async () => {
    const company = await createCompany(server)
    const { session, xsrf } = await sessionLogin(company.admin.email, company.admin.password)
    const cookie = cookieHeader({ crm_session: session.value, "XSRF-TOKEN": xsrf.value })
    assert.strictEqual((await request(server, "POST", "/v1/auth/logout", { headers: { cookie } })).status, 419)
    const out = await request(server, "POST", "/v1/auth/logout", { headers: { cookie, "x-xsrf-token": xsrf.value } })
    assert.strictEqual(out.status, 200)
    assert.deepStrictEqual(out.body, { data: { message: "Logged out." } })
    const cleared = setCookies(out)
    assert.strictEqual(cleared.get("crm_session")?.value, "")
    assert.match(cleared.get("crm_session")!.raw, /Max-Age=0|Expires=Thu, 01 Jan 1970/i)
    assert.ok(cleared.has("XSRF-TOKEN"))
    const after = await request(server, "GET", "/v1/me", { headers: { cookie } })
    assert.strictEqual(after.status, 401)
    assert.deepStrictEqual(after.body, { message: "Unauthenticated." })
    const rows = await query(server, "SELECT 1 FROM sessions WHERE id = $1", [session.value])
    assert.strictEqual(rows.length, 0)
  })

  it("gives no bearer token and refuses bad credentials like the mobile login", async () => {
    const company = await createCompany(server)
    const { res } = await sessionLogin(company.admin.email, company.admin.password)
    assert.strictEqual(res.body.data.token, undefined)
    const xsrf = await csrfCookie(server)
    const wrong = await request(server, "POST", "/v1/auth/login", {
      body: { email: company.admin.email, password: "wrong-password" },
      headers: { cookie: cookieHeader({ "XSRF-TOKEN": xsrf.value }), "x-xsrf-token": xsrf.value }
    })
    assert.strictEqual(wrong.status, 422)
    assert.deepStrictEqual(wrong.body.errors, { email: ["These credentials do not match our records."] })
    assert.strictEqual(setCookies(wrong).get("crm_session"), undefined)
  })

  it("throttles session logins in their own bucket", async () => {
    const company = await createCompany(server)
    const xsrf = await csrfCookie(server)
    const headers = { cookie: cookieHeader({ "XSRF-TOKEN": xsrf.value }), "x-xsrf-token": xsrf.value }
    for (let attempt = 1; attempt <= 5; attempt++) {
      const res = await request(server, "POST", "/v1/auth/login", {
        body: { email: company.admin.email, password: "wrong-password" },
        headers
      })
      assert.strictEqual(res.status, 422)
    }
    const sixth = await request(server, "POST", "/v1/auth/login", {
      body: { email: company.admin.email, password: company.admin.password },
      headers
    })
    assert.strictEqual(sixth.status, 429)
    assert.strictEqual(sixth.headers.get("retry-after"), String(sixth.body.retry_after))
    // The mobile login of the same e-mail has its own bucket.
    assert.strictEqual((await mobileLogin(server, company.admin.email, company.admin.password)).status, 200)
  })

  it("a session of company A reads only A's data; a session follows current_company_id", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    await emitEvent(server, a.id, "test.marker", { company: "a" })
    await emitEvent(server, b.id, "test.marker", { company: "b" })
    const aSession = await sessionLogin(a.admin.email, a.admin.password)
    const bSession = await sessionLogin(b.admin.email, b.admin.password)
    const eventsWith = async (s: { session: { value: string } }) => {
      const res = await request(server, "GET", "/v1/events", { headers: { cookie: cookieHeader({ crm_session: s.session.value }) } })
      assert.strictEqual(res.status, 200, JSON.stringify(res.body))
      return [...new Set(res.body.data.items.map((e: any) => e.company_id))]
    }
    assert.deepStrictEqual(await eventsWith(aSession), [a.id])
    assert.deepStrictEqual(await eventsWith(bSession), [b.id])

    // A person in both companies: the session follows the account's current company.
    const both = await addUser(server, a.id, { role: "manager" })
    await addUser(server, b.id, { email: both.email, role: "agent" })
    const bothSession = await sessionLogin(both.email, both.password)
    assert.deepStrictEqual(await eventsWith(bothSession), [a.id])
    // Switched with another credential of the account: the session's cached resolution is dropped too.
    const phone = await mobileLogin(server, both.email, both.password)
    const switched = await request(server, "PUT", "/v1/me/current-company", {
      token: phone.body.data.token,
      body: { company_id: b.id }
    })
    assert.strictEqual(switched.status, 200, JSON.stringify(switched.body))
    assert.deepStrictEqual(await eventsWith(bothSession), [b.id])
  })
})

describe("session cookies behind https", () => {
  let secure: RunningServer
  beforeAll(async () => {
    secure = await startServer({ appUrl: "https://crm.example.test" })
  })
  afterAll(() => secure?.close())

  it("marks the cookies Secure when APP_URL is https", async () => {
    const xsrf = await csrfCookie(secure)
    assert.match(xsrf.raw, /Secure/i)
    const company = await createCompany(secure)
    const res = await request(secure, "POST", "/v1/auth/login", {
      body: { email: company.admin.email, password: company.admin.password },
      headers: { cookie: cookieHeader({ "XSRF-TOKEN": xsrf.value }), "x-xsrf-token": xsrf.value }
    })
    assert.strictEqual(res.status, 200)
    assert.match(setCookies(res).get("crm_session")!.raw, /Secure/i)
  })
})

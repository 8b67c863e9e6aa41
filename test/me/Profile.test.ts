import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { call, type Caller, mobileCaller, sessionCaller, uniquePhone } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const me = async (caller: Caller) => {
  const res = await call(server, caller, "GET", "/v1/me")
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data
}

/** A company with one extra person, signed in on a mobile token. */
const person = async (role: "admin" | "manager" | "agent" = "agent") => {
  const company = await createCompany(server)
  const user = await addUser(server, company.id, { role })
  return { company, user, caller: await mobileCaller(server, user.email, user.password) }
}

describe("POST /v1/me", () => {
  it("updates the profile fields and answers the whole profile, keeping the GET fields", async () => {
    const { company, user, caller } = await person()
    const res = await call(server, caller, "POST", "/v1/me", {
      name: "Ada",
      lastname: "Lovelace",
      timezone: "Asia/Almaty",
      locale: "pt-BR"
    })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    const profile = res.body.data
    assert.strictEqual(profile.id, user.id)
    assert.strictEqual(profile.name, "Ada")
    assert.strictEqual(profile.lastname, "Lovelace")
    assert.strictEqual(profile.timezone, "Asia/Almaty")
    assert.strictEqual(profile.locale, "pt-BR")
    assert.strictEqual(profile.current_company_id, company.id)
    assert.deepStrictEqual(profile.roles, ["agent"])
    for (const key of ["email", "email_verified", "phone", "phone_verified", "availability", "is_service_account", "permissions"]) {
      assert.property(profile, key)
    }
    assert.deepStrictEqual(await me(caller), profile)

    // Fields left out keep their values.
    const partial = await call(server, caller, "POST", "/v1/me", { lastname: null })
    assert.strictEqual(partial.body.data.name, "Ada")
    assert.strictEqual(partial.body.data.lastname, null)
    assert.strictEqual(partial.body.data.timezone, "Asia/Almaty")
  })

  it("works for a cabinet session too (with the anti-forgery header)", async () => {
    const company = await createCompany(server)
    const session = await sessionCaller(server, company.admin.email, company.admin.password)
    const res = await call(server, session, "POST", "/v1/me", { timezone: "America/New_York" })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.timezone, "America/New_York")
    assert.deepStrictEqual(res.body.data.roles, ["admin"])
  })

  it("refuses a phone that is not E.164, a zone that is not IANA and a bad locale with 422 on the field; nothing is saved", async () => {
    const { caller } = await person()
    const before = await me(caller)
    const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
      [{ phone: "87011234567" }, "phone"],
      [{ phone: "+0123456789" }, "phone"],
      [{ phone: "+1 000 000 0000" }, "phone"],
      [{ phone: "+123" }, "phone"],
      [{ phone: "+1234567890123456" }, "phone"],
      [{ phone: 77011234567 }, "phone"],
      [{ timezone: "Mars/Olympus" }, "timezone"],
      [{ timezone: "+05:00" }, "timezone"],
      [{ timezone: "" }, "timezone"],
      [{ locale: "english please" }, "locale"],
      [{ name: "   " }, "name"],
      [{ name: "x".repeat(256) }, "name"]
    ]
    for (const [body, field] of cases) {
      const res = await call(server, caller, "POST", "/v1/me", { ...body, lastname: "Changed" })
      assert.strictEqual(res.status, 422, JSON.stringify(body))
      assert.ok(res.body.errors[field], `${JSON.stringify(body)} -> ${JSON.stringify(res.body)}`)
      assert.isString(res.body.message)
    }
    assert.deepStrictEqual(await me(caller), before)
    for (const body of [{}, { email: "new@example.test", roles: ["admin"] }]) {
      const empty = await call(server, caller, "POST", "/v1/me", body)
      assert.strictEqual(empty.status, 422, JSON.stringify(body))
      assert.ok(empty.body.errors.body)
    }
  })

  it("a changed phone clears phone_verified; the same number keeps it; null removes the number", async () => {
    const { caller, user } = await person()
    const phone = uniquePhone()
    const set = await call(server, caller, "POST", "/v1/me", { phone })
    assert.strictEqual(set.body.data.phone, phone)
    assert.isFalse(set.body.data.phone_verified)
    await query(server, "UPDATE users SET phone_verified = true WHERE id = $1", [user.id])
    assert.isTrue((await me(caller)).phone_verified)

    const same = await call(server, caller, "POST", "/v1/me", { phone, name: "Same Number" })
    assert.isTrue(same.body.data.phone_verified)
    const other = uniquePhone()
    const changed = await call(server, caller, "POST", "/v1/me", { phone: other })
    assert.strictEqual(changed.status, 200)
    assert.strictEqual(changed.body.data.phone, other)
    assert.isFalse(changed.body.data.phone_verified)
    assert.isFalse((await me(caller)).phone_verified)

    await query(server, "UPDATE users SET phone_verified = true WHERE id = $1", [user.id])
    const removed = await call(server, caller, "POST", "/v1/me", { phone: null })
    assert.strictEqual(removed.body.data.phone, null)
    assert.isFalse(removed.body.data.phone_verified)
  })

  it("only ever touches the caller: an id in the body is ignored, another company's user is unchanged", async () => {
    const a = await createCompany(server)
    const b = await person()
    const res = await request(server, "POST", "/v1/me", { token: a.token, body: { id: b.user.id, user_id: b.user.id, name: "Hijacked" } })
    assert.strictEqual(res.status, 200)
    assert.notStrictEqual(res.body.data.id, b.user.id)
    assert.notStrictEqual((await me(b.caller)).name, "Hijacked")
  })
})

describe("POST /v1/me/password", () => {
  it("needs the right current password and a new one of 8+ characters", async () => {
    const { caller, user } = await person()
    const wrong = await call(server, caller, "POST", "/v1/me/password", { current_password: "nope-nope", password: "brand-new-pass" })
    assert.strictEqual(wrong.status, 422)
    assert.deepStrictEqual(Object.keys(wrong.body.errors), ["current_password"])
    const missing = await call(server, caller, "POST", "/v1/me/password", { password: "brand-new-pass" })
    assert.strictEqual(missing.status, 422)
    assert.ok(missing.body.errors.current_password)
    const short = await call(server, caller, "POST", "/v1/me/password", { current_password: user.password, password: "short" })
    assert.strictEqual(short.status, 422)
    assert.ok(short.body.errors.password)
    // Nothing changed: the old password still logs in.
    assert.strictEqual((await mobileLogin(server, user.email, user.password, "check")).status, 200)
  })

  it("from a mobile token: keeps that token, ends the other tokens and every session", async () => {
    const company = await createCompany(server)
    const user = await addUser(server, company.id)
    const phoneA = await mobileCaller(server, user.email, user.password, "phone-a")
    const phoneB = await mobileCaller(server, user.email, user.password, "phone-b")
    const web1 = await sessionCaller(server, user.email, user.password)
    const web2 = await sessionCaller(server, user.email, user.password)
    const colleague = await mobileCaller(server, company.admin.email, company.admin.password)

    const res = await call(server, phoneA, "POST", "/v1/me/password", { current_password: user.password, password: "a-new-password-1" })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.isString(res.body.data.message)

    assert.strictEqual((await call(server, phoneA, "GET", "/v1/me")).status, 200)
    for (const gone of [phoneB, web1, web2]) assert.strictEqual((await call(server, gone, "GET", "/v1/me")).status, 401)
    // Another account's credentials are untouched.
    assert.strictEqual((await call(server, colleague, "GET", "/v1/me")).status, 200)
    assert.strictEqual((await mobileLogin(server, user.email, user.password, "old")).status, 422)
    assert.strictEqual((await mobileLogin(server, user.email, "a-new-password-1", "new")).status, 200)
  })

  it("from a session: keeps that session, ends the other session and every mobile token", async () => {
    const company = await createCompany(server)
    const user = await addUser(server, company.id)
    const phone = await mobileCaller(server, user.email, user.password)
    const web1 = await sessionCaller(server, user.email, user.password)
    const web2 = await sessionCaller(server, user.email, user.password)
    const res = await call(server, web1, "POST", "/v1/me/password", { current_password: user.password, password: "a-new-password-2" })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.strictEqual((await call(server, web1, "GET", "/v1/me")).status, 200)
    assert.strictEqual((await call(server, web2, "GET", "/v1/me")).status, 401)
    assert.strictEqual((await call(server, phone, "GET", "/v1/me")).status, 401)
  })

  it("refuses service tokens with 403", async () => {
    const company = await createCompany(server)
    const res = await request(server, "POST", "/v1/me/password", {
      token: company.token,
      body: { current_password: "whatever-it-is", password: "another-one-1" }
    })
    assert.strictEqual(res.status, 403)
  })
})

describe("PUT /v1/me/availability", () => {
  it("sets online, away and offline; busy is system-derived and refused with 422", async () => {
    const { caller } = await person()
    for (const status of ["online", "away", "offline", "online"]) {
      const res = await call(server, caller, "PUT", "/v1/me/availability", { status })
      assert.strictEqual(res.status, 200, JSON.stringify(res.body))
      assert.strictEqual(res.body.data.availability, status)
      assert.strictEqual((await me(caller)).availability, status)
    }
    const busy = await call(server, caller, "PUT", "/v1/me/availability", { status: "busy" })
    assert.strictEqual(busy.status, 422)
    assert.match(busy.body.errors.status[0], /system/)
    for (const body of [{ status: "sleeping" }, { status: "" }, {}, { status: 1 }]) {
      const res = await call(server, caller, "PUT", "/v1/me/availability", body)
      assert.strictEqual(res.status, 422, JSON.stringify(body))
      assert.ok(res.body.errors.status)
    }
    assert.strictEqual((await me(caller)).availability, "online")
  })

  it("tells colleagues in every company of the member, once per change, through the events", async () => {
    const { company, user, caller } = await person()
    const other = await createCompany(server)
    await addUser(server, other.id, { email: user.email, role: "agent" })
    const stranger = await createCompany(server)
    const availability = async (token: string) =>
      (await request(server, "GET", "/v1/events?after=0&limit=100", { token })).body.data.items
        .filter((e: { event: string }) => e.event === "member.availability.updated")
        .map((e: { data: unknown }) => e.data)
    for (const status of ["away", "away", "online"]) {
      assert.strictEqual((await call(server, caller, "PUT", "/v1/me/availability", { status })).status, 200)
    }
    const expected = [{ id: user.id, availability: "away" }, { id: user.id, availability: "online" }]
    assert.deepStrictEqual(await availability(company.token), expected)
    assert.deepStrictEqual(await availability(other.token), expected)
    assert.deepStrictEqual(await availability(stranger.token), [])
  })
})

describe("PUT /v1/me/current-company", () => {
  /** One person: agent in A (active), manager in B; not a member of C. */
  const twoCompanies = async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const c = await createCompany(server)
    const user = await addUser(server, a.id, { role: "agent" })
    await addUser(server, b.id, { email: user.email, role: "manager" })
    return { a, b, c, user }
  }

  it("switches every credential of the account at once, with the new company's roles and permissions", async () => {
    const { a, b, user } = await twoCompanies()
    const token = await mobileCaller(server, user.email, user.password)
    const session = await sessionCaller(server, user.email, user.password)
    const before = await me(token)
    assert.strictEqual(before.current_company_id, a.id)
    assert.deepStrictEqual(before.roles, ["agent"])
    assert.notInclude(before.permissions, "sticker.update")

    const res = await call(server, token, "PUT", "/v1/me/current-company", { company_id: b.id })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.current_company_id, b.id)
    assert.deepStrictEqual(res.body.data.roles, ["manager"])
    assert.include(res.body.data.permissions, "sticker.update")
    assert.notInclude(res.body.data.permissions, "company_telephony.manage")

    // The token issued before the switch, and a session opened before it, both follow.
    for (const caller of [token, session]) {
      const now = await me(caller)
      assert.strictEqual(now.current_company_id, b.id)
      assert.deepStrictEqual(now.roles, ["manager"])
      assert.deepStrictEqual(now.permissions, res.body.data.permissions)
    }
    const [row] = await query(server, "SELECT current_company_id FROM users WHERE id = $1", [user.id])
    assert.strictEqual(Number(row.current_company_id), b.id)

    // Realtime authorization follows the active company.
    const authorize = (companyId: number) =>
      call(server, token, "POST", "/v1/broadcasting/auth", { socket_id: "123.456", channel_name: `private-company.${companyId}` })
    assert.strictEqual((await authorize(b.id)).status, 200)
    assert.strictEqual((await authorize(a.id)).status, 403)

    // And back, from the session this time.
    const back = await call(server, session, "PUT", "/v1/me/current-company", { company_id: a.id })
    assert.strictEqual(back.status, 200)
    assert.deepStrictEqual((await me(token)).roles, ["agent"])
    assert.strictEqual((await authorize(a.id)).status, 200)
  })

  it("cross-tenant: a company without membership (or that does not exist) is 422 on company_id and changes nothing", async () => {
    const { a, c, user } = await twoCompanies()
    const token = await mobileCaller(server, user.email, user.password)
    for (const companyId of [c.id, 987_654_321]) {
      const res = await call(server, token, "PUT", "/v1/me/current-company", { company_id: companyId })
      assert.strictEqual(res.status, 422)
      assert.ok(res.body.errors.company_id)
    }
    assert.strictEqual((await me(token)).current_company_id, a.id)
    // A's admin cannot reach into C either, nor see anything of it through /v1/me.
    const admin = await mobileCaller(server, a.admin.email, a.admin.password)
    assert.strictEqual((await call(server, admin, "PUT", "/v1/me/current-company", { company_id: c.id })).status, 422)
    assert.strictEqual((await me(admin)).current_company_id, a.id)
    const bad = await call(server, token, "PUT", "/v1/me/current-company", { company_id: "abc" })
    assert.strictEqual(bad.status, 422)
  })

  it("service accounts are bound to their company: 403", async () => {
    const { a, b } = await twoCompanies()
    for (const companyId of [a.id, b.id]) {
      const res = await request(server, "PUT", "/v1/me/current-company", { token: a.token, body: { company_id: companyId } })
      assert.strictEqual(res.status, 403)
    }
  })
})

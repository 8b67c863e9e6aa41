import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { addUser, latestCode, mailsTo, mobileLogin } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const verify = (token: string, code: unknown) => request(server, "POST", "/v1/auth/email/verify-code", { token, body: { code } })
const resend = (token: string) => request(server, "POST", "/v1/auth/email/resend-code", { token })
const otherCode = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, "0")

/** Lets the resend throttle pass without waiting a minute: the code looks issued 61 s earlier. */
const ageCode = (userId: number) =>
  query(server, "UPDATE email_codes SET expires_at = expires_at - interval '61 seconds' WHERE user_id = $1", [userId])

const freshUser = async () => {
  const company = await createCompany(server)
  const login = await mobileLogin(server, company.admin.email, company.admin.password)
  assert.strictEqual(login.status, 200)
  return { company, token: login.body.data.token as string, email: company.admin.email, id: company.admin.id }
}

describe("e-mail verification code", () => {
  it("is mailed on an unverified mobile login and verifies the e-mail", async () => {
    const user = await freshUser()
    const mails = await mailsTo(server, user.email)
    assert.strictEqual(mails.length, 1)
    assert.strictEqual(mails[0].subject, "Your verification code")
    const code = await latestCode(server, user.email)
    const [stored] = await query(server, "SELECT code_hash FROM email_codes WHERE user_id = $1", [user.id])
    assert.notInclude(Buffer.from(stored.code_hash).toString("latin1"), code)

    const wrong = await verify(user.token, otherCode(code))
    assert.strictEqual(wrong.status, 422)
    assert.deepStrictEqual(wrong.body.errors, { code: ["The code is invalid or has expired."] })
    const right = await verify(user.token, code)
    assert.strictEqual(right.status, 200, JSON.stringify(right.body))
    assert.deepStrictEqual(right.body, { data: { message: "E-mail verified.", email_verified: true } })

    const me = await request(server, "GET", "/v1/me", { token: user.token })
    assert.strictEqual(me.body.data.email_verified, true)
    const again = await mobileLogin(server, user.email, "password-123", "tablet")
    assert.strictEqual(again.body.data.email_verified, true)
    assert.strictEqual((await mailsTo(server, user.email)).length, 1)
    // Verified already: both endpoints are harmless no-ops.
    assert.deepStrictEqual((await verify(user.token, code)).body.data, { message: "E-mail already verified.", email_verified: true })
    const noop = await resend(user.token)
    assert.strictEqual(noop.status, 200)
    assert.strictEqual(noop.body.data.email_verified, true)
    assert.strictEqual((await mailsTo(server, user.email)).length, 1)
  })

  it("mails at most one code a minute: a second login sends none, resend answers 429", async () => {
    const user = await freshUser()
    await mobileLogin(server, user.email, "password-123", "tablet")
    assert.strictEqual((await mailsTo(server, user.email)).length, 1)
    const throttled = await resend(user.token)
    assert.strictEqual(throttled.status, 429)
    assert.strictEqual(throttled.body.message, "Too Many Requests.")
    assert.ok(throttled.body.retry_after >= 1 && throttled.body.retry_after <= 60, JSON.stringify(throttled.body))
    assert.strictEqual(throttled.headers.get("retry-after"), String(throttled.body.retry_after))
    assert.strictEqual((await mailsTo(server, user.email)).length, 1)
  })

  it("resend replaces the code: the old one stops working, the new one verifies", async () => {
    const user = await freshUser()
    const oldCode = await latestCode(server, user.email)
    await ageCode(user.id)
    const res = await resend(user.token)
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.deepStrictEqual(res.body.data, { message: "A new verification code has been sent.", email_verified: false })
    assert.strictEqual((await mailsTo(server, user.email)).length, 2)
    const newCode = await latestCode(server, user.email)
    if (newCode !== oldCode) assert.strictEqual((await verify(user.token, oldCode)).status, 422)
    assert.strictEqual((await verify(user.token, newCode)).status, 200)
  })

  it("kills the code after five wrong attempts", async () => {
    const user = await freshUser()
    const code = await latestCode(server, user.email)
    for (let attempt = 1; attempt <= 5; attempt++) {
      assert.strictEqual((await verify(user.token, otherCode(code))).status, 422, `attempt ${attempt}`)
    }
    const late = await verify(user.token, code)
    assert.strictEqual(late.status, 422)
    assert.ok(late.body.errors.code)
    // A dead code still holds the resend throttle, so guessing cannot be sped up by resending.
    assert.strictEqual((await resend(user.token)).status, 429)
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: user.token })).body.data.email_verified, false)
  })

  it("refuses an expired code", async () => {
    const user = await freshUser()
    const code = await latestCode(server, user.email)
    await query(server, "UPDATE email_codes SET expires_at = now() - interval '1 second' WHERE user_id = $1", [user.id])
    assert.strictEqual((await verify(user.token, code)).status, 422)
  })

  it("validates the code's shape", async () => {
    const user = await freshUser()
    for (const code of ["12345", "1234567", "abcdef", 123456, null]) {
      const res = await verify(user.token, code)
      assert.strictEqual(res.status, 422, JSON.stringify(code))
      assert.ok(res.body.errors.code, JSON.stringify(res.body))
    }
    const missing = await request(server, "POST", "/v1/auth/email/verify-code", { token: user.token, body: {} })
    assert.strictEqual(missing.status, 422)
  })

  it("needs a personal credential: 401 without one, 403 for a service token", async () => {
    const company = await createCompany(server)
    assert.strictEqual((await request(server, "POST", "/v1/auth/email/verify-code", { body: { code: "123456" } })).status, 401)
    assert.strictEqual((await request(server, "POST", "/v1/auth/email/resend-code")).status, 401)
    assert.strictEqual((await verify(company.token, "123456")).status, 403)
    assert.strictEqual((await resend(company.token)).status, 403)
  })

  it("a code only verifies the account it was sent to, even within the same company", async () => {
    const owner = await freshUser()
    const colleague = await addUser(server, owner.company.id)
    const login = await mobileLogin(server, colleague.email, colleague.password)
    const ownerCode = await latestCode(server, owner.email)
    const colleagueCode = await latestCode(server, colleague.email)
    if (ownerCode !== colleagueCode) {
      assert.strictEqual((await verify(login.body.data.token, ownerCode)).status, 422)
    }
    // Another company's user cannot spend this user's attempts or code either.
    const stranger = await freshUser()
    const strangerCode = await latestCode(server, stranger.email)
    if (strangerCode !== ownerCode) assert.strictEqual((await verify(stranger.token, ownerCode)).status, 422)
    assert.strictEqual((await verify(owner.token, ownerCode)).status, 200)
    const [row] = await query(server, "SELECT email_verified_at FROM users WHERE id = $1", [colleague.id])
    assert.strictEqual(row.email_verified_at, null)
  })
})

import { assert, describe, it } from "@effect/vitest"
import { Option, Redacted } from "effect"
import { afterAll, beforeAll } from "vitest"
import { addUser } from "../auth/support.ts"
import type { FakeHttp } from "../fakes/FakeHttp.ts"
import { twilioFake } from "../fakes/TwilioFake.ts"
import { call, mobileCaller, uniquePhone } from "../me/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

const sid = "AC0123456789abcdef0123456789abcdef"
const token = "twilio-auth-token-for-tests"
const messagesPath = `/2010-04-01/Accounts/${sid}/Messages.json`

let twilio: FakeHttp
let server: RunningServer
beforeAll(async () => {
  twilio = await twilioFake(sid, token).start()
  server = await startServer({
    twilioAccountSid: Option.some(sid),
    twilioAuthToken: Option.some(Redacted.make(token)),
    twilioFrom: "+12025550000",
    twilioApiBase: twilio.url
  })
})
afterAll(async () => {
  await server?.close()
  await twilio?.close()
})

const withPhone = async () => {
  const company = await createCompany(server)
  const user = await addUser(server, company.id)
  const caller = await mobileCaller(server, user.email, user.password)
  const phone = uniquePhone()
  const saved = await call(server, caller, "POST", "/v1/me", { phone })
  assert.strictEqual(saved.status, 200, JSON.stringify(saved.body))
  return { company, caller, phone }
}

describe("SMS over Twilio's Messages API", () => {
  it("sends the phone code through the API (form body, Basic auth, From) and the code verifies", async () => {
    const { caller, phone } = await withPhone()
    const sent = await call(server, caller, "POST", "/v1/me/phone/send-otp")
    assert.strictEqual(sent.status, 200, JSON.stringify(sent.body))
    const request = twilio.calls(`POST ${messagesPath}`).find((r) => r.body.To === phone)
    assert.ok(request !== undefined)
    assert.strictEqual(request.body.From, "+12025550000")
    assert.match(String(request.headers["content-type"]), /^application\/x-www-form-urlencoded/)
    const code = /\b(\d{6})\b/.exec(String(request.body.Body))?.[1]
    assert.ok(code !== undefined)
    const verified = await call(server, caller, "POST", "/v1/me/phone/verify", { code })
    assert.strictEqual(verified.status, 200, JSON.stringify(verified.body))
    assert.strictEqual(verified.body.data.phone_verified, true)
    // Nothing lands in the sandbox outbox when a gateway is configured.
    assert.strictEqual((await query(server, "SELECT 1 FROM outbound_sms WHERE to_number = $1", [phone])).length, 0)
  })

  it("answers 502 when Twilio refuses the message, and the code is not kept", async () => {
    const { caller, phone } = await withPhone()
    twilio.inject(`POST ${messagesPath}`, { status: 400, body: { code: 21610, message: "Attempt to send to unsubscribed recipient", status: 400 } })
    const sent = await call(server, caller, "POST", "/v1/me/phone/send-otp")
    assert.strictEqual(sent.status, 502, JSON.stringify(sent.body))
    assert.strictEqual(twilio.calls(`POST ${messagesPath}`).filter((r) => r.body.To === phone).length, 1)
    const verify = await call(server, caller, "POST", "/v1/me/phone/verify", { code: "123456" })
    assert.strictEqual(verify.status, 422)
  })

  it("keeps each company's records to itself: another company's contact is 404", async () => {
    const a = await withPhone()
    const contact = await request(server, "POST", "/v1/contacts", { token: a.company.token, body: { phones: [{ phone: a.phone }] } })
    assert.strictEqual(contact.status, 201, JSON.stringify(contact.body))
    const b = await createCompany(server)
    const other = await request(server, "GET", `/v1/contacts/${contact.body.data.id}`, { token: b.token })
    assert.strictEqual(other.status, 404)
  })
})

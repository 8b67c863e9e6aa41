import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { createChannel, inbound, threadOf } from "../messages/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { ageInbound, createContact, enableTelephony } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const eligibility = (token: string, contactId: number, channel?: number | string) =>
  request(server, "GET", `/v1/contacts/${contactId}/outbound-eligibility${channel === undefined ? "" : `?channel_id=${channel}`}`, { token })

const askPermission = (token: string, contactId: number, channelId: number) =>
  request(server, "POST", `/v1/contacts/${contactId}/call-permission/request`, { token, body: { channel_id: channelId } })

/** A telephony company and a contact who wrote on a msgr_a_business channel just now. */
const setup = async () => {
  const company = await createCompany(server)
  await enableTelephony(server, company.id)
  const business = await createChannel(server, company.token, "msgr_a_business")
  const received = await inbound(server, company.token, business, { from: { external_id: `1555${company.id}` } })
  const [{ contact_id }] = await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [received.conversation_id])
  return { company, business, contactId: contact_id, threadId: (await threadOf(server, received.message_id)).thread_id }
}

const now = () => Math.floor(Date.now() / 1000)

describe("outbound eligibility", () => {
  it("exists only when the company has telephony", async () => {
    const company = await createCompany(server)
    const contact = await createContact(server, company.token, { firstName: "A" })
    const channel = await createChannel(server, company.token, "msgr_a_business")
    const res = await eligibility(company.token, contact.id, channel)
    assert.deepStrictEqual([res.status, res.body], [404, { message: `The route v1/contacts/${contact.id}/outbound-eligibility could not be found.` }])
    const ask = await askPermission(company.token, contact.id, channel)
    assert.strictEqual(ask.status, 404)
    await enableTelephony(server, company.id)
    assert.strictEqual((await eligibility(company.token, contact.id, channel)).status, 200)
  })

  it("reports the 24-hour window of msgr_a_business inside and outside it", async () => {
    const { company, business, contactId, threadId } = await setup()
    const inside = await eligibility(company.token, contactId, business)
    assert.strictEqual(inside.status, 200, JSON.stringify(inside.body))
    const message = inside.body.data.eligibility.message
    assert.deepStrictEqual([message.window_open, message.requires_template], [true, false])
    assert.ok(Math.abs(message.window_expires_at - (now() + 24 * 3600)) <= 5, String(message.window_expires_at))
    assert.deepStrictEqual(inside.body.data.eligibility.call, {
      channel_kind: "msgr_a_business",
      can_call: false,
      permission_status: "none",
      permission_expires_at: null,
      can_request_permission: true,
      request_cooldown_until: null,
      attempts_remaining: 2,
      has_msgr_a_account: true
    })

    await ageInbound(server, threadId, 30)
    const outside = (await eligibility(company.token, contactId, business)).body.data.eligibility.message
    assert.deepStrictEqual([outside.window_open, outside.requires_template], [false, true])
    assert.ok(Math.abs(outside.window_expires_at - (now() - 6 * 3600)) <= 5, String(outside.window_expires_at))
  })

  it("answers the SIP trunk (no channel_id, or sip) as not_required and callable; other messengers cannot call", async () => {
    const { company, contactId } = await setup()
    const sip = {
      message: { window_open: false, window_expires_at: null, requires_template: false },
      call: {
        channel_kind: "sip",
        can_call: true,
        permission_status: "not_required",
        permission_expires_at: null,
        can_request_permission: false,
        request_cooldown_until: null,
        attempts_remaining: 0,
        has_msgr_a_account: true
      }
    }
    assert.deepStrictEqual((await eligibility(company.token, contactId)).body.data.eligibility, sip)
    assert.deepStrictEqual((await eligibility(company.token, contactId, "sip")).body.data.eligibility, sip)

    const telegram = await createChannel(server, company.token, "msgr_b")
    const res = await eligibility(company.token, contactId, telegram)
    assert.deepStrictEqual(res.body.data.eligibility.message, { window_open: true, window_expires_at: null, requires_template: false })
    assert.deepStrictEqual(
      [res.body.data.eligibility.call.channel_kind, res.body.data.eligibility.call.can_call, res.body.data.eligibility.call.permission_status],
      ["msgr_b", false, "unavailable"]
    )
    const nobody = await createContact(server, company.token, { firstName: "No accounts" })
    assert.strictEqual((await eligibility(company.token, nobody.id)).body.data.eligibility.call.has_msgr_a_account, false)
    assert.strictEqual((await eligibility(company.token, contactId, "fax")).status, 422)
  })

  it("a granted permission makes the contact callable until it expires; a block stops it", async () => {
    const { company, business, contactId } = await setup()
    await query(
      server,
      `INSERT INTO call_permission_requests (company_id, contact_id, channel_id, status, requested_at, answered_at, expires_at)
       VALUES ($1, $2, $3, 'granted', now() - interval '1 hour', now() - interval '1 hour', now() + interval '6 days')`,
      [company.id, contactId, business]
    )
    const call = (await eligibility(company.token, contactId, business)).body.data.eligibility.call
    assert.deepStrictEqual([call.permission_status, call.can_call, call.can_request_permission], ["granted", true, false])
    assert.ok(Math.abs(call.permission_expires_at - (now() + 6 * 86400)) <= 5)
    const asked = await askPermission(company.token, contactId, business)
    assert.deepStrictEqual([asked.status, asked.body.error_code], [422, "call_permission_granted"])

    await request(server, "POST", `/v1/contacts/${contactId}/block`, { token: company.token })
    assert.strictEqual((await eligibility(company.token, contactId, business)).body.data.eligibility.call.can_call, false)
  })
})

describe("call-permission requests", () => {
  it("counts attempts with a daily cooldown and a weekly cap; 429 carries the eligibility", async () => {
    const { company, business, contactId } = await setup()
    const first = await askPermission(company.token, contactId, business)
    assert.strictEqual(first.status, 200, JSON.stringify(first.body))
    const call = first.body.data.eligibility.call
    assert.deepStrictEqual([call.permission_status, call.attempts_remaining, call.can_request_permission], ["pending", 1, false])
    assert.ok(Math.abs(call.request_cooldown_until - (now() + 86400)) <= 5)
    assert.ok(Math.abs(call.permission_expires_at - (now() + 7 * 86400)) <= 5)

    const limited = await askPermission(company.token, contactId, business)
    assert.strictEqual(limited.status, 429)
    assert.deepStrictEqual(Object.keys(limited.body), ["data"])
    assert.strictEqual(limited.body.data.message, "Call-permission request limit reached.")
    assert.strictEqual(limited.body.data.eligibility.call.request_cooldown_until, call.request_cooldown_until)
    assert.ok(Number(limited.headers.get("retry-after")) > 86000)

    // A day later the second (and last) request of the week is allowed.
    await query(server, "UPDATE call_permission_requests SET requested_at = requested_at - interval '25 hours' WHERE contact_id = $1", [contactId])
    const second = await askPermission(company.token, contactId, business)
    assert.strictEqual(second.status, 200, JSON.stringify(second.body))
    assert.strictEqual(second.body.data.eligibility.call.attempts_remaining, 0)
    await query(server, "UPDATE call_permission_requests SET requested_at = requested_at - interval '25 hours' WHERE contact_id = $1", [contactId])
    const weekly = await askPermission(company.token, contactId, business)
    assert.strictEqual(weekly.status, 429)
    const cooldown = weekly.body.data.eligibility.call.request_cooldown_until
    // The week runs from the older of the two requests, 50 hours ago.
    assert.ok(Math.abs(cooldown - (now() + 7 * 86400 - 50 * 3600)) <= 5, String(cooldown))
    const rows = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM call_permission_requests WHERE contact_id = $1", [contactId])
    assert.strictEqual(rows[0].n, 2)
  })

  it("refuses channels without call permissions, blocked contacts and contacts without a business account", async () => {
    const { company, business, contactId } = await setup()
    const telegram = await createChannel(server, company.token, "msgr_b")
    const wrong = await askPermission(company.token, contactId, telegram)
    assert.deepStrictEqual([wrong.status, wrong.body.error_code], [422, "call_permission_not_required"])
    const stranger = await createContact(server, company.token, { firstName: "No WA" })
    const none = await askPermission(company.token, stranger.id, business)
    assert.deepStrictEqual([none.status, none.body.error_code], [422, "no_msgr_a_business_account"])
    await request(server, "POST", `/v1/contacts/${contactId}/block`, { token: company.token })
    const blocked = await askPermission(company.token, contactId, business)
    assert.deepStrictEqual([blocked.status, blocked.body.error_code], [422, "contact_blocked"])
    assert.strictEqual((await request(server, "POST", `/v1/contacts/${contactId}/call-permission/request`, { token: company.token, body: {} })).status, 422)
  })

  it("another company's contact or channel is 404", async () => {
    const { company, business, contactId } = await setup()
    const other = await setup()
    for (const res of [await eligibility(other.company.token, contactId, other.business), await askPermission(other.company.token, contactId, other.business)]) {
      assert.deepStrictEqual([res.status, res.body], [404, { message: "Contact not found." }])
    }
    for (const res of [await eligibility(company.token, contactId, other.business), await askPermission(company.token, contactId, other.business)]) {
      assert.deepStrictEqual([res.status, res.body], [404, { message: "Channel not found." }])
    }
    assert.strictEqual((await eligibility(company.token, contactId, business)).status, 200)
  })
})

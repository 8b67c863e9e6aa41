import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { callPermissionText } from "../../src/contacts/Eligibility.ts"
import { type ChannelContext, Providers } from "../../src/providers/Provider.ts"
import { SandboxLog } from "../../src/providers/Sandbox.ts"
import { WhatsAppFake } from "../fakes/WhatsAppFake.ts"
import { createChannel, inbound, threadOf } from "../messages/support.ts"
import { fileServer } from "../support/FileServer.ts"
import { eventsOf, query } from "../support/Sql.ts"
import { createCompany, request } from "../support/TestServer.ts"
import { ageInbound, enableTelephony, whatsappChannel } from "./support.ts"

const wa = new WhatsAppFake()
const server = fileServer(() => ({ whatsappApiBase: wa.http.url }), [wa.http])

const day = 86_400
const now = () => Math.floor(Date.now() / 1000)
const near = (actual: number | null, expected: number, slack = 5) =>
  assert.ok(actual !== null && Math.abs(actual - expected) <= slack, `${actual} is not about ${expected}`)

const eligibility = async (token: string, contactId: number, channelId: number) => {
  const res = await request(server, "GET", `/v1/contacts/${contactId}/outbound-eligibility?channel_id=${channelId}`, { token })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.eligibility.call
}
const askPermission = (token: string, contactId: number, channelId: number) =>
  request(server, "POST", `/v1/contacts/${contactId}/call-permission/request`, { token, body: { channel_id: channelId } })
const sandboxReply = (token: string, channelId: number, body: Record<string, unknown>) =>
  request(server, "POST", `/v1/channels/${channelId}/sandbox/call-permission`, { token, body })
const sandboxRequests = (channelId: number) =>
  server.runInApp(SandboxLog.useSync((log) => log.calls(channelId).filter((c) => c.operation === "call_permission_request")))
const requestRows = (contactId: number) =>
  query<{ status: string; origin: string; permanent: boolean; external_message_id: string | null; requested_by_user_id: number | null }>(
    server,
    "SELECT status, origin, permanent, external_message_id, requested_by_user_id FROM call_permission_requests WHERE contact_id = $1 ORDER BY id",
    [contactId]
  )
const permissionEvents = async (companyId: number) =>
  (await eventsOf(server, companyId, "contact.call_permission.updated")).map((e) => e.payload)
/** Moves every request and answer of the contact `hours` into the past. */
const age = (contactId: number, hours: number) =>
  query(
    server,
    `UPDATE call_permission_requests SET requested_at = requested_at - make_interval(hours => $2),
       answered_at = answered_at - make_interval(hours => $2) WHERE contact_id = $1`,
    [contactId, hours]
  )

/** A telephony company with a WhatsApp Cloud channel, and a contact who just wrote on it. */
const whatsappSetup = async () => {
  const company = await createCompany(server)
  await enableTelephony(server, company.id)
  const creds = { access_token: `EAAcall${company.id}`, phone_number_id: `9${company.id}`, app_secret: `call-secret-${company.id}`, verify_token: "v" }
  const channelId = await whatsappChannel(server, wa, company.token, creds, "WA calls")
  const waId = `1777${company.id}`
  const hook = (payload: unknown, secret = creds.app_secret) => {
    const signed = WhatsAppFake.signed(secret, payload)
    return request(server, "POST", `/hooks/whatsapp/${channelId}`, { raw: signed.body, headers: { "x-hub-signature-256": signed.signature } })
  }
  const hello = await hook(WhatsAppFake.notification(creds.phone_number_id, {
    contacts: [{ profile: { name: "Callee" }, wa_id: waId }],
    messages: [{ from: waId, id: `wamid.HELLO${company.id}`, timestamp: String(now()), type: "text", text: { body: "call me maybe" } }]
  }))
  assert.strictEqual(hello.status, 200, JSON.stringify(hello.body))
  const [{ contact_id }] = await query<{ contact_id: number }>(
    server,
    "SELECT contact_id FROM contact_accounts WHERE company_id = $1 AND external_id = $2",
    [company.id, waId]
  )
  const reply = (fields: Omit<Parameters<typeof WhatsAppFake.callPermissionReply>[1], "from">, secret?: string) =>
    hook(WhatsAppFake.callPermissionReply(creds.phone_number_id, { from: waId, ...fields }), secret)
  return { company, creds, channelId, waId, contactId: contact_id, hook, reply }
}

/** A telephony company with a sandbox msgr_a_business channel and a contact who just wrote on it. */
const sandboxSetup = async (settings: Record<string, unknown> = {}) => {
  const company = await createCompany(server)
  await enableTelephony(server, company.id)
  const channelId = await createChannel(server, company.token, "msgr_a_business", { settings })
  const externalId = `1888${company.id}`
  const received = await inbound(server, company.token, channelId, { from: { external_id: externalId } })
  const [{ contact_id }] = await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [received.conversation_id])
  return { company, channelId, externalId, contactId: contact_id, threadId: (await threadOf(server, received.message_id)).thread_id }
}

describe("call permission over the WhatsApp Cloud API", () => {
  it("sends the interactive request, then the signed call_permission_reply grants calls until its expiry", async () => {
    const s = await whatsappSetup()
    const asked = await askPermission(s.company.token, s.contactId, s.channelId)
    assert.strictEqual(asked.status, 200, JSON.stringify(asked.body))
    const pending = asked.body.data.eligibility.call
    assert.deepStrictEqual([pending.permission_status, pending.can_call, pending.attempts_remaining], ["pending", false, 1])

    const sent = wa.http.calls("POST messages").filter((r) => r.path === `/${s.creds.phone_number_id}/messages`)
    assert.strictEqual(sent.length, 1)
    assert.strictEqual(sent[0].headers.authorization, `Bearer ${s.creds.access_token}`)
    assert.deepStrictEqual(sent[0].body, {
      messaging_product: "whatsapp",
      recipient_type: "individual",
      to: s.waId,
      type: "interactive",
      interactive: { type: "call_permission_request", action: { name: "call_permission_request" }, body: { text: callPermissionText } }
    })
    const [row] = await requestRows(s.contactId)
    assert.strictEqual(row.status, "pending")
    assert.strictEqual(typeof row.requested_by_user_id, "number")
    const requestId = row.external_message_id!
    assert.deepStrictEqual(wa.callPermissionRequests.get(requestId), { to: s.waId, body: callPermissionText })

    const expires = now() + 7 * day - 120
    const accepted = await s.reply({ id: `wamid.ACCEPT${s.company.id}`, requestMessageId: requestId, response: "accept", expirationTimestamp: expires })
    assert.deepStrictEqual([accepted.status, accepted.body], [200, { ok: true }])
    const call = await eligibility(s.company.token, s.contactId, s.channelId)
    assert.deepStrictEqual(
      [call.permission_status, call.permission_expires_at, call.can_call, call.can_request_permission],
      ["granted", expires, true, false]
    )
    // The answer is a state of the contact, not a message of the conversation.
    const [{ n }] = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM messages WHERE channel_id = $1", [s.channelId])
    assert.strictEqual(n, 1)

    const events = await permissionEvents(s.company.id)
    assert.deepStrictEqual(events.map((e) => [e.contact_id, e.channel_id, e.previous_status, e.permission_status, e.source]), [
      [s.contactId, s.channelId, "none", "pending", "request"],
      [s.contactId, s.channelId, "pending", "granted", "reply"]
    ])
    assert.strictEqual(events[0].requested_by_user_id, row.requested_by_user_id)
    assert.deepStrictEqual([events[1].permission_expires_at, events[1].response, events[1].permanent], [expires, "accept", false])

    // Meta redelivers; the same answer changes nothing. A forged one is refused before anything is read.
    await s.reply({ id: `wamid.ACCEPT${s.company.id}`, requestMessageId: requestId, response: "accept", expirationTimestamp: expires })
    const forged = await s.reply({ id: `wamid.FORGED${s.company.id}`, requestMessageId: requestId, response: "reject" }, "not-the-app-secret")
    assert.strictEqual(forged.status, 401)
    assert.strictEqual((await permissionEvents(s.company.id)).length, 2)
    assert.strictEqual((await eligibility(s.company.token, s.contactId, s.channelId)).permission_status, "granted")

    const again = await askPermission(s.company.token, s.contactId, s.channelId)
    assert.deepStrictEqual([again.status, again.body.error_code], [422, "call_permission_granted"])
  })

  it("records a rejection; an answer nobody asked for (permanent, from the profile) costs no attempt", async () => {
    const s = await whatsappSetup()
    assert.strictEqual((await askPermission(s.company.token, s.contactId, s.channelId)).status, 200)
    const [{ external_message_id }] = await requestRows(s.contactId)
    assert.strictEqual((await s.reply({ id: `wamid.NO${s.company.id}`, requestMessageId: external_message_id!, response: "reject" })).status, 200)
    const rejected = await eligibility(s.company.token, s.contactId, s.channelId)
    assert.deepStrictEqual([rejected.permission_status, rejected.can_call, rejected.attempts_remaining], ["rejected", false, 1])
    near(rejected.permission_expires_at, now() + 7 * day)
    // The refusal does not lift the daily limit.
    const limited = await askPermission(s.company.token, s.contactId, s.channelId)
    assert.strictEqual(limited.status, 429)
    assert.strictEqual(limited.body.data.eligibility.call.permission_status, "rejected")

    await s.reply({ id: `wamid.PROFILE${s.company.id}`, response: "accept", isPermanent: true })
    const granted = await eligibility(s.company.token, s.contactId, s.channelId)
    assert.deepStrictEqual(
      [granted.permission_status, granted.permission_expires_at, granted.can_call, granted.attempts_remaining],
      ["granted", null, true, 1]
    )
    assert.deepStrictEqual((await requestRows(s.contactId)).map((r) => [r.status, r.origin, r.permanent]), [
      ["rejected", "request", false],
      ["granted", "reply", true]
    ])
    const [last] = (await permissionEvents(s.company.id)).slice(-1)
    assert.deepStrictEqual([last.previous_status, last.permission_status, last.permission_expires_at, last.permanent], ["rejected", "granted", null, true])
  })

  it("answers a provider failure with 502 and counts nothing; a closed window at the provider is 422", async () => {
    const s = await whatsappSetup()
    wa.http.inject("POST messages", { status: 503, body: "unavailable", contentType: "text/plain" })
    const down = await askPermission(s.company.token, s.contactId, s.channelId)
    assert.strictEqual(down.status, 502)
    assert.deepStrictEqual(Object.keys(down.body), ["message"])
    assert.match(down.body.message, /unavailable/)
    assert.deepStrictEqual(await requestRows(s.contactId), [])
    const untouched = await eligibility(s.company.token, s.contactId, s.channelId)
    assert.deepStrictEqual([untouched.permission_status, untouched.attempts_remaining, untouched.can_request_permission], ["none", 2, true])
    assert.deepStrictEqual(await permissionEvents(s.company.id), [])

    wa.closedWindow.add(s.waId)
    const closed = await askPermission(s.company.token, s.contactId, s.channelId)
    wa.closedWindow.delete(s.waId)
    assert.deepStrictEqual([closed.status, closed.body.error_code], [422, "wa_window_closed"])
    assert.deepStrictEqual(await requestRows(s.contactId), [])

    // The failed attempts did not count: the retry goes through.
    const retry = await askPermission(s.company.token, s.contactId, s.channelId)
    assert.strictEqual(retry.status, 200, JSON.stringify(retry.body))
    assert.deepStrictEqual((await requestRows(s.contactId)).map((r) => r.status), ["pending"])
  })

  it("reads an expiry sent as a string and skips answers without a usable response", async () => {
    const s = await whatsappSetup()
    assert.strictEqual((await askPermission(s.company.token, s.contactId, s.channelId)).status, 200)
    const bare = WhatsAppFake.notification(s.creds.phone_number_id, {
      messages: [
        { from: s.waId, id: `wamid.BARE${s.company.id}`, timestamp: String(now()), type: "interactive", interactive: { type: "call_permission_reply" } },
        {
          from: s.waId,
          id: `wamid.ODD${s.company.id}`,
          timestamp: String(now()),
          type: "interactive",
          interactive: { type: "call_permission_reply", call_permission_reply: { response: "maybe" } }
        }
      ]
    })
    assert.strictEqual((await s.hook(bare)).status, 200)
    assert.strictEqual((await eligibility(s.company.token, s.contactId, s.channelId)).permission_status, "pending")
    const [{ n }] = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM messages WHERE channel_id = $1", [s.channelId])
    assert.strictEqual(n, 1)

    const expires = now() + 3 * day
    const payload = WhatsAppFake.callPermissionReply(s.creds.phone_number_id, { from: s.waId, id: `wamid.STR${s.company.id}`, response: "accept" })
    ;(payload.entry[0].changes[0].value as any).messages[0].interactive.call_permission_reply.expiration_timestamp = String(expires)
    assert.strictEqual((await s.hook(payload)).status, 200)
    const call = await eligibility(s.company.token, s.contactId, s.channelId)
    assert.deepStrictEqual([call.permission_status, call.permission_expires_at], ["granted", expires])
  })

  it("keeps tenants apart: another company's answer, token or channel reaches nothing", async () => {
    const a = await whatsappSetup()
    const b = await whatsappSetup()
    assert.strictEqual((await askPermission(a.company.token, a.contactId, a.channelId)).status, 200)
    // B's channel hears from A's contact's number: A's contact is not touched.
    const foreign = await b.hook(WhatsAppFake.callPermissionReply(b.creds.phone_number_id, { from: a.waId, id: `wamid.X${a.company.id}`, response: "accept" }))
    assert.strictEqual(foreign.status, 200)
    assert.strictEqual((await eligibility(a.company.token, a.contactId, a.channelId)).permission_status, "pending")
    // A's answer signed with A's secret but posted to B's channel is refused.
    const signed = WhatsAppFake.signed(a.creds.app_secret, WhatsAppFake.callPermissionReply(a.creds.phone_number_id, { from: a.waId, id: "wamid.Y", response: "accept" }))
    const wrongChannel = await request(server, "POST", `/hooks/whatsapp/${b.channelId}`, { raw: signed.body, headers: { "x-hub-signature-256": signed.signature } })
    assert.strictEqual(wrongChannel.status, 401)
    assert.strictEqual((await eligibility(a.company.token, a.contactId, a.channelId)).permission_status, "pending")

    const notMine = await askPermission(b.company.token, a.contactId, b.channelId)
    assert.deepStrictEqual([notMine.status, notMine.body], [404, { message: "Contact not found." }])
    const otherChannel = await askPermission(a.company.token, a.contactId, b.channelId)
    assert.deepStrictEqual([otherChannel.status, otherChannel.body], [404, { message: "Channel not found." }])
    assert.deepStrictEqual(await permissionEvents(b.company.id), [])
  })
})

describe("call permission on the sandbox provider", () => {
  it("sends through the sandbox and takes the simulated answer", async () => {
    const s = await sandboxSetup()
    const asked = await askPermission(s.company.token, s.contactId, s.channelId)
    assert.strictEqual(asked.status, 200, JSON.stringify(asked.body))
    const calls = await sandboxRequests(s.channelId)
    assert.deepStrictEqual(calls.map((c) => [c.args.recipient, c.args.body, c.outcome]), [[s.externalId, callPermissionText, "ok"]])

    const accepted = await sandboxReply(s.company.token, s.channelId, { from: { external_id: s.externalId }, response: "accept" })
    assert.strictEqual(accepted.status, 200, JSON.stringify(accepted.body))
    assert.deepStrictEqual(
      [accepted.body.data.contact_id, accepted.body.data.channel_id, accepted.body.data.permission_status],
      [s.contactId, s.channelId, "granted"]
    )
    near(accepted.body.data.permission_expires_at, now() + 7 * day)
    const call = await eligibility(s.company.token, s.contactId, s.channelId)
    assert.deepStrictEqual([call.permission_status, call.can_call], ["granted", true])
    assert.strictEqual(call.permission_expires_at, accepted.body.data.permission_expires_at)

    // The contact withdraws: the newest answer wins.
    const withdrawn = await sandboxReply(s.company.token, s.channelId, { from: { external_id: s.externalId }, response: "reject" })
    assert.strictEqual(withdrawn.body.data.permission_status, "rejected")
    assert.deepStrictEqual([(await eligibility(s.company.token, s.contactId, s.channelId)).can_call], [false])
    assert.deepStrictEqual((await permissionEvents(s.company.id)).map((e) => e.permission_status), ["pending", "granted", "rejected"])
  })

  it("adapters of channel types that cannot call refuse the request without reaching out", async () => {
    const context = (type: ChannelContext["type"], provider: ChannelContext["provider"], credentials: Record<string, string> = {}): ChannelContext =>
      ({ id: 0, companyId: 0, type, provider, status: "connected", credentials, settings: {} })
    const refusal = (channel: ChannelContext) =>
      server.runInApp(Effect.flip(Providers.use((p) => p.forChannel(channel).requestCallPermission(channel, "15550001", "May we call?"))))
    for (const type of ["msgr_a", "msgr_b", "msgr_c_business"] as const) {
      assert.strictEqual((await refusal(context(type, "sandbox"))).code, "not_supported", type)
    }
    assert.strictEqual((await refusal(context("msgr_b", "telegram", { bot_token: "1:AAtelegramTokenValue" }))).code, "not_supported")
  })

  it("validates the simulated answer", async () => {
    const s = await sandboxSetup()
    const stranger = await sandboxReply(s.company.token, s.channelId, { from: { external_id: "nobody" }, response: "accept" })
    assert.deepStrictEqual([stranger.status, Object.keys(stranger.body.errors)], [422, ["from.external_id"]])
    const bad = await sandboxReply(s.company.token, s.channelId, { from: { external_id: s.externalId }, response: "maybe" })
    assert.strictEqual(bad.status, 422)
    assert.ok("response" in bad.body.errors, JSON.stringify(bad.body))
    const telegram = await createChannel(server, s.company.token, "msgr_b")
    const noCalls = await sandboxReply(s.company.token, telegram, { from: { external_id: s.externalId }, response: "accept" })
    assert.deepStrictEqual([noCalls.status, noCalls.body.error_code], [422, "call_permission_not_required"])
    const real = await whatsappSetup()
    const notSandbox = await sandboxReply(real.company.token, real.channelId, { from: { external_id: real.waId }, response: "accept" })
    assert.deepStrictEqual([notSandbox.status, notSandbox.body.error_code], [422, "channel_not_sandbox"])
    const foreign = await sandboxReply(real.company.token, s.channelId, { from: { external_id: s.externalId }, response: "accept" })
    assert.deepStrictEqual([foreign.status, foreign.body], [404, { message: "Channel not found." }])
    assert.strictEqual((await eligibility(s.company.token, s.contactId, s.channelId)).permission_status, "none")
  })

  it("answers 502 when the sandbox fails (settings.sandbox_fail) and records nothing", async () => {
    const s = await sandboxSetup({ sandbox_fail: true })
    const failed = await askPermission(s.company.token, s.contactId, s.channelId)
    assert.strictEqual(failed.status, 502)
    assert.match(failed.body.message, /channel_offline/)
    assert.deepStrictEqual((await sandboxRequests(s.channelId)).map((c) => c.outcome), ["channel_offline"])
    assert.deepStrictEqual(await requestRows(s.contactId), [])
    const call = await eligibility(s.company.token, s.contactId, s.channelId)
    assert.deepStrictEqual([call.permission_status, call.attempts_remaining, call.can_request_permission], ["none", 2, true])
  })

  it("keeps the limits: answers do not reset them, concurrent requests pass once, a closed window asks nobody", async () => {
    const s = await sandboxSetup()
    const [first, second] = await Promise.all([
      askPermission(s.company.token, s.contactId, s.channelId),
      askPermission(s.company.token, s.contactId, s.channelId)
    ])
    assert.deepStrictEqual([first.status, second.status].sort(), [200, 429])
    assert.strictEqual((await sandboxRequests(s.channelId)).length, 1)
    await sandboxReply(s.company.token, s.channelId, { from: { external_id: s.externalId }, response: "reject" })
    assert.strictEqual((await askPermission(s.company.token, s.contactId, s.channelId)).status, 429)

    await age(s.contactId, 25)
    const next = await askPermission(s.company.token, s.contactId, s.channelId)
    assert.strictEqual(next.status, 200, JSON.stringify(next.body))
    assert.deepStrictEqual([next.body.data.eligibility.call.permission_status, next.body.data.eligibility.call.attempts_remaining], ["pending", 0])
    await age(s.contactId, 25)
    const weekly = await askPermission(s.company.token, s.contactId, s.channelId)
    assert.strictEqual(weekly.status, 429)
    assert.strictEqual((await sandboxRequests(s.channelId)).length, 2)

    const other = await sandboxSetup()
    await ageInbound(server, other.threadId, 30)
    const closed = await askPermission(other.company.token, other.contactId, other.channelId)
    assert.deepStrictEqual([closed.status, closed.body.error_code], [422, "wa_window_closed"])
    assert.strictEqual((await eligibility(other.company.token, other.contactId, other.channelId)).can_request_permission, false)
    assert.deepStrictEqual(await sandboxRequests(other.channelId), [])
  })

  it("exists only for companies with telephony, and another company's contact is 404", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_a_business")
    const received = await inbound(server, company.token, channelId, { from: { external_id: `1999${company.id}` } })
    const [{ contact_id }] = await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [received.conversation_id])
    const off = await askPermission(company.token, contact_id, channelId)
    assert.deepStrictEqual([off.status, off.body], [404, { message: `The route v1/contacts/${contact_id}/call-permission/request could not be found.` }])
    assert.deepStrictEqual(await sandboxRequests(channelId), [])

    const other = await sandboxSetup()
    const foreign = await askPermission(other.company.token, contact_id, other.channelId)
    assert.deepStrictEqual([foreign.status, foreign.body], [404, { message: "Contact not found." }])
    assert.deepStrictEqual(await requestRows(contact_id), [])
  })
})

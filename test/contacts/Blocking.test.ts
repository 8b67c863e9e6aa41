import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SandboxLog } from "../../src/providers/Sandbox.ts"
import { addUser, mobileLogin } from "../auth/support.ts"
import { WhatsAppFake } from "../fakes/WhatsAppFake.ts"
import { createChannel, inbound, send, threadOf } from "../messages/support.ts"
import { fileServer } from "../support/FileServer.ts"
import { connectPusher, listen, next, subscribe } from "../support/PusherClient.ts"
import { eventsOf, query } from "../support/Sql.ts"
import { createCompany, request } from "../support/TestServer.ts"
import { ageInbound, createContact, getContact, whatsappChannel } from "./support.ts"

const wa = new WhatsAppFake()
const server = fileServer(() => ({ whatsappApiBase: wa.http.url }), [wa.http])

const sandboxCalls = (channelId: number) => server.runInApp(SandboxLog.useSync((log) => log.calls(channelId)))

const post = (token: string, path: string, body?: unknown) => request(server, "POST", path, { token, body })

/** One contact with threads on a msgr_a, a msgr_a_business (window closed 30 h ago) and a msgr_b channel. */
const contactOnThreeChannels = async (token: string, settings: Record<string, unknown> = {}) => {
  const personal = await createChannel(server, token, "msgr_a", { settings })
  const business = await createChannel(server, token, "msgr_a_business", { settings })
  const other = await createChannel(server, token, "msgr_b")
  const first = await inbound(server, token, personal, { from: { external_id: "15550000001", name: "Blocky" } })
  const [{ contact_id }] = await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [first.conversation_id])
  // The same person on the business channel and on msgr_b, linked to the same contact.
  await request(server, "PATCH", `/v1/contacts/${contact_id}`, {
    token,
    body: {
      contactAccounts: [
        { channel_type: "msgr_a", external_id: "15550000001" },
        { channel_type: "msgr_a_business", external_id: "15550000001" },
        { channel_type: "msgr_b", external_id: "tg-blocky" }
      ]
    }
  })
  const onBusiness = await inbound(server, token, business, { from: { external_id: "15550000001" } })
  await inbound(server, token, other, { from: { external_id: "tg-blocky" } })
  const businessThread = (await threadOf(server, onBusiness.message_id)).thread_id
  await ageInbound(server, businessThread, 30)
  return { contactId: contact_id, personal, business, other, businessThread, personalThread: (await threadOf(server, first.message_id)).thread_id }
}

describe("block preview and the block state table", () => {
  it("previews the msgr_a and msgr_a_business channels with a thread, window_open false when msgr_a_business is past 24 h", async () => {
    const company = await createCompany(server)
    const setup = await contactOnThreeChannels(company.token)
    const res = await request(server, "GET", `/v1/contacts/${setup.contactId}/block-preview`, { token: company.token })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.contact_id, setup.contactId)
    assert.strictEqual(res.body.data.blocked, false)
    assert.deepStrictEqual(
      res.body.data.channels.map((c: any) => [c.channel_id, c.channel_type, c.provider_block_supported, c.window_open]),
      [[setup.personal, "msgr_a", true, true], [setup.business, "msgr_a_business", true, false]]
    )
    assert.ok(res.body.data.channels.every((c: any) => typeof c.channel_name === "string" && c.channel_name !== ""))

    const lonely = await createContact(server, company.token, { firstName: "No threads" })
    const empty = await request(server, "GET", `/v1/contacts/${lonely.id}/block-preview`, { token: company.token })
    assert.deepStrictEqual(empty.body.data.channels, [])
  })

  it("blocks locally first, then at the providers; repeats are no-ops without provider calls; unblock is symmetric", async () => {
    const company = await createCompany(server)
    const setup = await contactOnThreeChannels(company.token)

    const blocked = await post(company.token, `/v1/contacts/${setup.contactId}/block`, { reason: " spam " })
    assert.strictEqual(blocked.status, 200, JSON.stringify(blocked.body))
    const data = blocked.body.data
    assert.deepStrictEqual(Object.keys(data).sort(), ["blocked_at", "blocked_reason", "contact_id", "message", "provider_failures"])
    assert.deepStrictEqual([data.message, data.contact_id, data.blocked_reason], ["Contact blocked.", setup.contactId, "spam"])
    assert.ok(!Number.isNaN(Date.parse(data.blocked_at)))
    // The business channel refuses: nobody wrote there in 24 hours. msgr_b is not asked at all.
    assert.strictEqual(data.provider_failures.length, 1)
    assert.deepStrictEqual(
      [data.provider_failures[0].channel_id, data.provider_failures[0].error_code],
      [setup.business, "not_reachable_24h"]
    )
    assert.strictEqual(typeof data.provider_failures[0].message, "string")
    assert.deepStrictEqual((await sandboxCalls(setup.personal)).filter((c) => c.operation === "block").map((c) => [c.args.externalUserId, c.outcome]), [["15550000001", "ok"]])
    assert.strictEqual((await sandboxCalls(setup.other)).filter((c) => c.operation === "block").length, 0)

    const contact = (await getContact(server, company.token, setup.contactId)).body.data
    assert.deepStrictEqual([contact.blocked_at, contact.blocked_reason], [data.blocked_at, "spam"])
    assert.strictEqual(typeof contact.blocked_by_user_id, "number")

    // The send path reads the same block.
    const refused = await send(server, company.token, { channel_id: setup.personal, thread_id: setup.personalThread, text: "hi" })
    assert.deepStrictEqual([refused.status, refused.body], [422, { message: "This contact is blocked; the message was not sent.", error_code: "contact_blocked" }])

    const again = await post(company.token, `/v1/contacts/${setup.contactId}/block`, { reason: "other" })
    assert.deepStrictEqual(again.body.data, {
      message: "Contact was already blocked.",
      contact_id: setup.contactId,
      blocked_at: data.blocked_at,
      blocked_reason: "spam",
      provider_failures: []
    })
    assert.strictEqual((await sandboxCalls(setup.personal)).filter((c) => c.operation === "block").length, 1)
    assert.strictEqual((await sandboxCalls(setup.business)).filter((c) => c.operation === "block").length, 1)

    const unblocked = await post(company.token, `/v1/contacts/${setup.contactId}/unblock`)
    assert.strictEqual(unblocked.status, 200, JSON.stringify(unblocked.body))
    assert.deepStrictEqual(unblocked.body.data, {
      message: "Contact unblocked.",
      contact_id: setup.contactId,
      blocked_at: null,
      blocked_reason: null,
      provider_failures: []
    })
    // Unblocking is not bound to the 24-hour window.
    assert.deepStrictEqual((await sandboxCalls(setup.business)).filter((c) => c.operation === "unblock").map((c) => c.outcome), ["ok"])
    assert.deepStrictEqual((await sandboxCalls(setup.personal)).filter((c) => c.operation === "unblock").map((c) => c.outcome), ["ok"])
    assert.strictEqual((await getContact(server, company.token, setup.contactId)).body.data.blocked_at, null)

    const noop = await post(company.token, `/v1/contacts/${setup.contactId}/unblock`)
    assert.deepStrictEqual(noop.body.data.message, "Contact was not blocked.")
    assert.deepStrictEqual(noop.body.data.provider_failures, [])
    assert.strictEqual((await sandboxCalls(setup.personal)).filter((c) => c.operation === "unblock").length, 1)

    const blockEvents = await eventsOf(server, company.id, "contact.blocked")
    assert.deepStrictEqual(blockEvents.map((e) => [e.payload.contact_id, e.payload.blocked_reason]), [[setup.contactId, "spam"]])
    assert.strictEqual((await eventsOf(server, company.id, "contact.unblocked")).length, 1)
  })

  it("keeps the local block when every provider call fails (channel_offline)", async () => {
    const company = await createCompany(server)
    const setup = await contactOnThreeChannels(company.token, { sandbox_fail: true })
    const res = await post(company.token, `/v1/contacts/${setup.contactId}/block`)
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.message, "Contact blocked.")
    assert.strictEqual(res.body.data.blocked_reason, null)
    assert.deepStrictEqual(
      res.body.data.provider_failures.map((f: any) => [f.channel_id, f.error_code]),
      [[setup.personal, "channel_offline"], [setup.business, "channel_offline"]]
    )
    assert.notStrictEqual((await getContact(server, company.token, setup.contactId)).body.data.blocked_at, null)
  })

  it("blocks and unblocks through the WhatsApp Cloud API adapter; a user outside the window is not_reachable_24h", async () => {
    const company = await createCompany(server)
    const creds = { access_token: `EAA${company.id}`, phone_number_id: `7${company.id}`, app_secret: "block-secret", verify_token: "block-verify" }
    const channelId = await whatsappChannel(server, wa, company.token, creds)
    const deliver = async (waId: string, id: string) => {
      const hook = WhatsAppFake.signed(creds.app_secret, {
        object: "whatsapp_business_account",
        entry: [{
          id: "WABA",
          changes: [{
            field: "messages",
            value: {
              messaging_product: "whatsapp",
              metadata: { phone_number_id: creds.phone_number_id },
              contacts: [{ profile: { name: "Wally" }, wa_id: waId }],
              messages: [{ from: waId, id, timestamp: String(Math.floor(Date.now() / 1000)), type: "text", text: { body: "hi" } }]
            }
          }]
        }]
      })
      const res = await request(server, "POST", `/hooks/whatsapp/${channelId}`, { raw: hook.body, headers: { "x-hub-signature-256": hook.signature } })
      assert.strictEqual(res.status, 200, JSON.stringify(res.body))
      const [row] = await query<{ contact_id: number }>(
        server,
        "SELECT contact_id FROM contact_accounts WHERE company_id = $1 AND external_id = $2",
        [company.id, waId]
      )
      return row.contact_id
    }
    const reachable = `1555${company.id}01`
    const silent = `1555${company.id}02`
    const ok = await deliver(reachable, `wamid.B${company.id}1`)
    const closed = await deliver(silent, `wamid.B${company.id}2`)
    wa.closedWindow.add(silent)

    const res = await post(company.token, `/v1/contacts/${ok}/block`)
    assert.deepStrictEqual([res.status, res.body.data.provider_failures], [200, []])
    assert.ok(wa.blocked.has(reachable))
    const request0 = wa.http.calls("POST block_users").at(-1)!
    assert.strictEqual(request0.path, `/${creds.phone_number_id}/block_users`)
    assert.deepStrictEqual(request0.body, { messaging_product: "whatsapp", block_users: [{ user: reachable }] })

    const unblock = await post(company.token, `/v1/contacts/${ok}/unblock`)
    assert.deepStrictEqual([unblock.status, unblock.body.data.provider_failures], [200, []])
    assert.ok(!wa.blocked.has(reachable))
    assert.deepStrictEqual(wa.http.calls("DELETE block_users").at(-1)!.body, { messaging_product: "whatsapp", block_users: [{ user: reachable }] })

    const refused = await post(company.token, `/v1/contacts/${closed}/block`, { reason: "abuse" })
    assert.strictEqual(refused.status, 200)
    assert.deepStrictEqual(refused.body.data.provider_failures.map((f: any) => [f.channel_id, f.error_code]), [[channelId, "not_reachable_24h"]])
    assert.notStrictEqual((await getContact(server, company.token, closed)).body.data.blocked_at, null)
  })

  it("needs contact:update, and another company's contact is 404", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const contact = await createContact(server, company.token, { firstName: "Mine" })
    const agent = await addUser(server, company.id, { role: "agent" })
    const token = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
    // Agents hold contact.update (and the contact:update alias).
    assert.strictEqual((await post(token, `/v1/contacts/${contact.id}/block`)).status, 200)
    for (const path of ["block", "unblock"]) {
      const res = await post(other.token, `/v1/contacts/${contact.id}/${path}`)
      assert.deepStrictEqual([res.status, res.body], [404, { message: "Contact not found." }])
    }
    const preview = await request(server, "GET", `/v1/contacts/${contact.id}/block-preview`, { token: other.token })
    assert.strictEqual(preview.status, 404)
    assert.strictEqual((await post(company.token, `/v1/contacts/${contact.id}/block`, { reason: "x".repeat(501) })).status, 422)
  })
})

describe("block throttles", () => {
  it("allows 6 changes an hour per contact, then 429 with Retry-After", async () => {
    const company = await createCompany(server)
    const contact = await createContact(server, company.token, { firstName: "Flappy" })
    for (let i = 0; i < 3; i++) {
      assert.strictEqual((await post(company.token, `/v1/contacts/${contact.id}/block`)).status, 200)
      assert.strictEqual((await post(company.token, `/v1/contacts/${contact.id}/unblock`)).status, 200)
    }
    const limited = await post(company.token, `/v1/contacts/${contact.id}/block`)
    assert.strictEqual(limited.status, 429)
    assert.strictEqual(limited.body.message, "Too Many Requests.")
    assert.ok(limited.body.retry_after > 3500 && limited.body.retry_after <= 3600, String(limited.body.retry_after))
    assert.strictEqual(limited.headers.get("retry-after"), String(limited.body.retry_after))
    assert.strictEqual((await getContact(server, company.token, contact.id)).body.data.blocked_at, null)
    // A no-op is not a change: the already-unblocked contact can still be "unblocked".
    assert.strictEqual((await post(company.token, `/v1/contacts/${contact.id}/unblock`)).status, 200)
    // Another contact of the company is not affected.
    const other = await createContact(server, company.token, { firstName: "Calm" })
    assert.strictEqual((await post(company.token, `/v1/contacts/${other.id}/block`)).status, 200)
  })

  it("allows 60 changes an hour per company", async () => {
    const company = await createCompany(server)
    const contacts = []
    for (let i = 0; i < 11; i++) contacts.push(await createContact(server, company.token, { firstName: `C${i}` }))
    for (const contact of contacts.slice(0, 10)) {
      for (let i = 0; i < 3; i++) {
        assert.strictEqual((await post(company.token, `/v1/contacts/${contact.id}/block`)).status, 200)
        assert.strictEqual((await post(company.token, `/v1/contacts/${contact.id}/unblock`)).status, 200)
      }
    }
    const limited = await post(company.token, `/v1/contacts/${contacts[10].id}/block`)
    assert.strictEqual(limited.status, 429)
    // Other companies have their own budget.
    const other = await createCompany(server)
    const theirs = await createContact(server, other.token, { firstName: "Free" })
    assert.strictEqual((await post(other.token, `/v1/contacts/${theirs.id}/block`)).status, 200)
  })

  it("allows 300 changes a day per company, counting the durable log", async () => {
    const company = await createCompany(server)
    // 299 changes earlier today, spread over contacts, older than an hour.
    await query(
      server,
      `INSERT INTO company_throttle_log (company_id, log, subject, at)
       SELECT $1, 'contact_block', (i % 60)::text, now() - interval '2 hours' - make_interval(secs => i) FROM generate_series(1, 299) i`,
      [company.id]
    )
    const contact = await createContact(server, company.token, { firstName: "Last" })
    assert.strictEqual((await post(company.token, `/v1/contacts/${contact.id}/block`)).status, 200)
    const limited = await post(company.token, `/v1/contacts/${contact.id}/unblock`)
    assert.strictEqual(limited.status, 429)
    assert.ok(limited.body.retry_after > 20 * 3600, String(limited.body.retry_after))
  })
})

describe("opt-out and opt-in", () => {
  it("sets and clears opted_out_at with events; repeats are no-ops", async () => {
    const company = await createCompany(server)
    const contact = await createContact(server, company.token, { firstName: "Sub" })
    const out = await post(company.token, `/v1/contacts/${contact.id}/opt-out`)
    assert.strictEqual(out.status, 200, JSON.stringify(out.body))
    assert.deepStrictEqual([out.body.data.message, out.body.data.contact_id], ["Contact opted out.", contact.id])
    const at = out.body.data.opted_out_at
    assert.ok(!Number.isNaN(Date.parse(at)))
    assert.strictEqual((await getContact(server, company.token, contact.id)).body.data.opted_out_at, at)
    const again = await post(company.token, `/v1/contacts/${contact.id}/opt-out`)
    assert.deepStrictEqual(again.body.data, { message: "Contact was already opted out.", contact_id: contact.id, opted_out_at: at })

    const back = await post(company.token, `/v1/contacts/${contact.id}/opt-in`)
    assert.deepStrictEqual(back.body.data, { message: "Contact opted in.", contact_id: contact.id, opted_out_at: null })
    const noop = await post(company.token, `/v1/contacts/${contact.id}/opt-in`)
    assert.deepStrictEqual(noop.body.data, { message: "Contact was not opted out.", contact_id: contact.id, opted_out_at: null })

    assert.deepStrictEqual((await eventsOf(server, company.id, "contact.opted_out")).map((e) => e.payload), [{ contact_id: contact.id, opted_out_at: at, source: "api" }])
    assert.deepStrictEqual((await eventsOf(server, company.id, "contact.opted_in")).map((e) => e.payload), [{ contact_id: contact.id, source: "api" }])
    const other = await createCompany(server)
    assert.strictEqual((await post(other.token, `/v1/contacts/${contact.id}/opt-out`)).status, 404)
  })

  it("an inbound stop word opts the contact out automatically; opt-in clears it", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    const received = await inbound(server, company.token, channelId, { from: { external_id: "stopper" }, text: " STOP " })
    const [{ contact_id }] = await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [received.conversation_id])
    const contact = (await getContact(server, company.token, contact_id)).body.data
    assert.notStrictEqual(contact.opted_out_at, null)
    const [event] = await eventsOf(server, company.id, "contact.opted_out")
    assert.deepStrictEqual([event.payload.contact_id, event.payload.source], [contact_id, "stop_word"])
    const back = await post(company.token, `/v1/contacts/${contact_id}/opt-in`)
    assert.strictEqual(back.body.data.opted_out_at, null)
  })
})

describe("contact events on the realtime channel", () => {
  it.live("delivers contact.blocked and contact.opted_out to the company's subscribers", () =>
    Effect.gen(function*() {
      const company = yield* Effect.promise(() => createCompany(server))
      const contact = yield* Effect.promise(() => createContact(server, company.token, { firstName: "Live" }))
      const client = yield* connectPusher({ realtimePort: server.realtimePort, appKey: server.pusherAppKey, apiUrl: server.url, token: company.token })
      const channel = yield* subscribe(client, `private-company.${company.id}`)
      const blocked = yield* listen(channel, "contact.blocked")
      const optedOut = yield* listen(channel, "contact.opted_out")
      yield* Effect.promise(() => post(company.token, `/v1/contacts/${contact.id}/block`, { reason: "live" }))
      yield* Effect.promise(() => post(company.token, `/v1/contacts/${contact.id}/opt-out`))
      const event = (yield* next(blocked)) as any
      assert.deepStrictEqual([event.event, event.company_id, event.data.contact_id, event.data.blocked_reason], ["contact.blocked", company.id, contact.id, "live"])
      const out = (yield* next(optedOut)) as any
      assert.deepStrictEqual([out.data.contact_id, out.data.source], [contact.id, "api"])
    }))
})

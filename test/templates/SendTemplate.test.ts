import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { SandboxLog } from "../../src/providers/Sandbox.ts"
import { inbound, messageCount, threadOf } from "../messages/support.ts"
import { eventsOf, query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { approvedTemplate, createTemplate, sendTemplate } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const variables = { first_name: "Ann", order_id: "A-42" }

describe("POST /v1/messages/send-template", () => {
  it("sends an approved template outside the 24-hour window, through the conversation lane", async () => {
    const a = await createCompany(server)
    const t = await approvedTemplate(server, a.token)
    const received = await inbound(server, a.token, t.channelId, { from: { external_id: "15550009", phone: "+15550009" } })
    const { thread_id } = await threadOf(server, received.message_id)
    await query(server, "UPDATE threads SET last_inbound_at = now() - interval '3 days' WHERE id = $1", [thread_id])
    await query(server, "UPDATE messages SET \"timestamp\" = now() - interval '3 days' WHERE id = $1", [received.message_id])

    // Free-form text is refused there …
    const text = await request(server, "POST", "/v1/messages/send", {
      token: a.token,
      body: { channel_id: t.channelId, thread_id, text: "hello" }
    })
    assert.strictEqual(text.status, 422)
    assert.strictEqual(text.body.error_code, "template_required")

    // … the template goes out.
    const res = await sendTemplate(server, a.token, { channel_id: t.channelId, template_id: t.groupId, thread_id, variables })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    const m = res.body.data
    assert.strictEqual(m.message_type, "template")
    assert.strictEqual(m.message_content, "Hi Ann, your order A-42 has shipped.")
    assert.strictEqual(m.status, "sent")
    assert.strictEqual(m.thread_id, thread_id)
    const [stored] = await query<{ metadata: any }>(server, "SELECT metadata FROM messages WHERE id = $1", [m.id])
    assert.strictEqual(stored.metadata.template.id, t.instanceId)
    assert.strictEqual(stored.metadata.template.template_group_id, t.groupId)
    assert.strictEqual(stored.metadata.template.language, "en")
    assert.deepStrictEqual(stored.metadata.template.variables, variables)

    // The provider got the template by name with named variables.
    const calls = await server.runInApp(SandboxLog.useSync((log) => log.calls(t.channelId)))
    const sent = calls.filter((c) => c.operation === "send").at(-1)!
    assert.deepStrictEqual(sent.args.template, {
      name: t.template.slug,
      language: "en",
      header: [],
      body: [{ name: "first_name", value: "Ann" }, { name: "order_id", value: "A-42" }]
    })

    const created = (await eventsOf(server, a.id, "message.created")).map((e) => e.payload).filter((p) => p.message.id === m.id)
    assert.strictEqual(created.length, 1)
    assert.strictEqual(created[0].type, "template")

    // uses_count counts sends, per instance and for the group.
    const after = await request(server, "GET", `/v1/templates/${t.groupId}`, { token: a.token })
    assert.strictEqual(after.body.data.uses_count, 1)
    assert.strictEqual(after.body.data.logical_template.uses_count, 1)
  })

  it("addresses a contact or a phone number, the instance id works as template_id", async () => {
    const a = await createCompany(server)
    const t = await approvedTemplate(server, a.token)
    const res = await sendTemplate(server, a.token, {
      channel_id: t.channelId,
      template_id: t.instanceId,
      to: { phone: "+49 151 2345 6789" },
      variables
    })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.message_type, "template")
    const [contact] = await query<{ contact_id: number }>(
      server,
      "SELECT ca.contact_id FROM threads t JOIN contact_accounts ca ON ca.id = t.contact_account_id WHERE t.id = $1",
      [res.body.data.thread_id]
    )
    const again = await sendTemplate(server, a.token, {
      channel_id: t.channelId,
      template_id: t.groupId,
      language: "en",
      contact_id: contact.contact_id,
      variables
    })
    assert.strictEqual(again.status, 201, JSON.stringify(again.body))
    assert.strictEqual(again.body.data.thread_id, res.body.data.thread_id)
  })

  it("422s: no approved instance, unknown language, missing variables, bad targets; nothing is sent", async () => {
    const a = await createCompany(server)
    const t = await approvedTemplate(server, a.token)
    const before = await messageCount(server, a.id)
    const base = { channel_id: t.channelId, template_id: t.groupId, to: { phone: "+15550100" }, variables }

    const draft = await createTemplate(server, a.token, [t.channelId])
    const unapproved = await sendTemplate(server, a.token, { ...base, template_id: draft.id })
    assert.strictEqual(unapproved.status, 422)
    assert.ok(unapproved.body.errors.template_id, JSON.stringify(unapproved.body))

    const language = await sendTemplate(server, a.token, { ...base, language: "de" })
    assert.strictEqual(language.status, 422)
    assert.ok(language.body.errors.language)

    const missing = await sendTemplate(server, a.token, { ...base, variables: { first_name: "Ann" } })
    assert.strictEqual(missing.status, 422)
    assert.deepStrictEqual(Object.keys(missing.body.errors), ["variables.order_id"])
    const blank = await sendTemplate(server, a.token, { ...base, variables: { first_name: " ", order_id: "1" } })
    assert.ok(blank.body.errors["variables.first_name"])

    const twoTargets = await sendTemplate(server, a.token, { ...base, thread_id: 1 })
    assert.strictEqual(twoTargets.status, 422)
    assert.ok(twoTargets.body.errors.thread_id)

    // Another business channel of the company has no approved instance of it.
    const otherChannel = await request(server, "POST", "/v1/channels", {
      token: a.token,
      body: { type: "msgr_a_business", provider: "sandbox", name: "second" }
    })
    const elsewhere = await sendTemplate(server, a.token, { ...base, channel_id: otherChannel.body.data.id })
    assert.strictEqual(elsewhere.status, 422)
    assert.ok(elsewhere.body.errors.template_id)

    // Archived templates are not sent.
    await request(server, "POST", `/v1/templates/${t.groupId}/archive`, { token: a.token })
    const archived = await sendTemplate(server, a.token, base)
    assert.strictEqual(archived.status, 422)
    assert.match(archived.body.errors.template_id[0], /archived/)

    assert.strictEqual(await messageCount(server, a.id), before)
  })

  it("a blocked contact is refused with the send rule's 422", async () => {
    const a = await createCompany(server)
    const t = await approvedTemplate(server, a.token)
    const received = await inbound(server, a.token, t.channelId)
    const { thread_id } = await threadOf(server, received.message_id)
    const [{ contact_id }] = await query<{ contact_id: number }>(
      server,
      "SELECT c.contact_id FROM conversations c JOIN threads t ON t.conversation_id = c.id WHERE t.id = $1",
      [thread_id]
    )
    await query(server, "UPDATE contacts SET blocked_at = now() WHERE id = $1", [contact_id])
    const res = await sendTemplate(server, a.token, { channel_id: t.channelId, template_id: t.groupId, thread_id, variables })
    assert.strictEqual(res.status, 422)
    assert.strictEqual(res.body.error_code, "contact_blocked")
  })

  it("Idempotency-Key: a repeat replays the first message; another body with the key is 422", async () => {
    const a = await createCompany(server)
    const t = await approvedTemplate(server, a.token)
    const body = { channel_id: t.channelId, template_id: t.groupId, to: { phone: "+15550200" }, variables }
    const key = `tpl-${Math.random()}`
    const first = await sendTemplate(server, a.token, body, { "idempotency-key": key })
    assert.strictEqual(first.status, 201, JSON.stringify(first.body))
    const before = await messageCount(server, a.id)
    const again = await sendTemplate(server, a.token, body, { "idempotency-key": key })
    assert.strictEqual(again.status, 201)
    assert.strictEqual(again.body.data.id, first.body.data.id)
    assert.strictEqual(await messageCount(server, a.id), before)
    const other = await sendTemplate(server, a.token, { ...body, variables: { ...variables, order_id: "B-7" } }, { "idempotency-key": key })
    assert.strictEqual(other.status, 422)
    assert.strictEqual(other.body.error_code, "idempotency_key_mismatch")
    // The same key on /send is another scope.
    const [{ n }] = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM idempotency_keys WHERE key = $1 AND endpoint = 'send-template'", [key])
    assert.strictEqual(n, 1)
    const uses = await request(server, "GET", `/v1/templates/${t.groupId}`, { token: a.token })
    assert.strictEqual(uses.body.data.uses_count, 1)
  })

  it("another company's template or channel is 404", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const t = await approvedTemplate(server, a.token)
    const mine = await approvedTemplate(server, b.token)
    const foreignTemplate = await sendTemplate(server, b.token, {
      channel_id: mine.channelId,
      template_id: t.groupId,
      to: { phone: "+15550300" },
      variables
    })
    assert.strictEqual(foreignTemplate.status, 404)
    const foreignInstance = await sendTemplate(server, b.token, {
      channel_id: mine.channelId,
      template_id: t.instanceId,
      to: { phone: "+15550300" },
      variables
    })
    assert.strictEqual(foreignInstance.status, 404)
    const foreignChannel = await sendTemplate(server, b.token, {
      channel_id: t.channelId,
      template_id: mine.groupId,
      to: { phone: "+15550300" },
      variables
    })
    assert.strictEqual(foreignChannel.status, 404)
  })
})

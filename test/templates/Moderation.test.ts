import { assert, describe, it } from "@effect/vitest"
import { WhatsAppFake } from "../fakes/WhatsAppFake.ts"
import { createChannel } from "../messages/support.ts"
import { fileServer } from "../support/FileServer.ts"
import { unique } from "../support/Ids.ts"
import { payloadsOf, query } from "../support/Sql.ts"
import { createCompany, request } from "../support/TestServer.ts"
import { createTemplate, eventually, sendTemplate, syncThen, syncUntil } from "./support.ts"

const wa = new WhatsAppFake()
const server = fileServer(() => ({ whatsappApiBase: wa.http.url }), [wa.http])

const call = (method: string, path: string, token: string, body?: unknown) => request(server, method, path, { token, body })

const whatsappChannel = async (token: string) => {
  const credentials = {
    access_token: `EAA${unique("tok").replace(/\W/g, "")}`,
    phone_number_id: String(Math.floor(Math.random() * 1e9)),
    business_account_id: String(Math.floor(Math.random() * 1e9)),
    app_secret: "moderation-app-secret",
    verify_token: "verify"
  }
  wa.tokens.add(credentials.access_token)
  const res = await call("POST", "/v1/channels", token, { type: "msgr_a_business", provider: "whatsapp_cloud", name: "WA", credentials })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return { id: res.body.data.id as number, ...credentials }
}

const notify = (channel: { id: number; app_secret: string }, payload: unknown) => {
  const signed = WhatsAppFake.signed(channel.app_secret, payload)
  return request(server, "POST", `/hooks/whatsapp/${channel.id}`, { raw: signed.body, headers: { "x-hub-signature-256": signed.signature } })
}

/** The template-list reads of one channel's business account. */
const listCalls = (channel: { business_account_id: string }) =>
  wa.http.calls("GET message_templates").filter((c) => c.path === `/${channel.business_account_id}/message_templates`)

const eventsOf = async (token: string, id: number) =>
  (await call("GET", `/v1/templates/${id}/events`, token)).body.data.reverse() as Array<any>

describe("moderation on whatsapp_cloud (Graph API message_templates, NAMED parameters)", () => {
  it("submit, status webhook, sync, send, delete", async () => {
    const a = await createCompany(server)
    const channel = await whatsappChannel(a.token)
    const t = await createTemplate(server, a.token, [channel.id], {
      name: "Shipping notice",
      header_enabled: true,
      header_type: "text",
      header_text: "Order {{order_id}}",
      footer_enabled: true,
      footer_text: "Reply STOP to opt out",
      buttons_enabled: true,
      buttons: [{ type: "url", label: "Track", value: "https://example.test/track" }, { type: "quick_reply", label: "Thanks" }]
    })

    const submitted = await call("POST", `/v1/templates/${t.id}/submit`, a.token)
    assert.strictEqual(submitted.status, 200, JSON.stringify(submitted.body))
    assert.strictEqual(submitted.body.data.template.meta_status, "pending")
    const externalId = submitted.body.data.template.external_id as string
    const created = wa.http.calls("POST message_templates").at(-1)!
    assert.strictEqual(created.path, `/${channel.business_account_id}/message_templates`)
    assert.strictEqual(created.headers.authorization, `Bearer ${channel.access_token}`)
    assert.strictEqual(created.body.name, "shipping_notice")
    assert.strictEqual(created.body.parameter_format, "NAMED")
    assert.strictEqual(created.body.category, "UTILITY")
    assert.deepStrictEqual(created.body.components, [
      { type: "HEADER", format: "TEXT", text: "Order {{order_id}}", example: { header_text_named_params: [{ param_name: "order_id", example: "A-42" }] } },
      {
        type: "BODY",
        text: "Hi {{first_name}}, your order {{order_id}} has shipped.",
        example: { body_text_named_params: [{ param_name: "first_name", example: "Ann" }, { param_name: "order_id", example: "A-42" }] }
      },
      { type: "FOOTER", text: "Reply STOP to opt out" },
      { type: "BUTTONS", buttons: [{ type: "URL", text: "Track", url: "https://example.test/track" }, { type: "QUICK_REPLY", text: "Thanks" }] }
    ])
    assert.ok(wa.templates.has(externalId))

    // Meta approves: the status webhook updates meta_status and writes a provider-driven event.
    const approved = await notify(channel, wa.decide(externalId, "APPROVED"))
    assert.strictEqual(approved.status, 200, JSON.stringify(approved.body))
    const afterHook = await call("GET", `/v1/templates/${t.id}`, a.token)
    assert.strictEqual(afterHook.body.data.meta_status, "approved")
    const hookEvent = (await eventsOf(a.token, t.id)).find((e) => e.type === "meta_approved")
    assert.strictEqual(hookEvent.actor, null)
    assert.strictEqual(hookEvent.channel.id, channel.id)
    // A redelivery changes nothing.
    await notify(channel, wa.decide(externalId, "APPROVED"))
    assert.strictEqual((await eventsOf(a.token, t.id)).filter((e) => e.type === "meta_approved").length, 1)

    // The send goes to Meta as a template with named parameters in header and body.
    const sent = await sendTemplate(server, a.token, {
      channel_id: channel.id,
      template_id: t.template_group_id,
      to: { phone: "+12022239999" },
      variables: { first_name: "Bo", order_id: "Z-9" }
    })
    assert.strictEqual(sent.status, 201, JSON.stringify(sent.body))
    assert.strictEqual(sent.body.data.status, "sent")
    assert.strictEqual(sent.body.data.message_content, "Order Z-9\n\nHi Bo, your order Z-9 has shipped.\n\nReply STOP to opt out")
    assert.deepStrictEqual(wa.http.calls("POST messages").at(-1)!.body.template, {
      name: "shipping_notice",
      language: { code: "en" },
      components: [
        { type: "header", parameters: [{ type: "text", parameter_name: "order_id", text: "Z-9" }] },
        {
          type: "body",
          parameters: [{ type: "text", parameter_name: "first_name", text: "Bo" }, { type: "text", parameter_name: "order_id", text: "Z-9" }]
        }
      ]
    })

    // Meta pauses it without a webhook reaching us: sync reads it back.
    wa.decide(externalId, "PAUSED")
    await syncUntil(server, a.token, t.id, (x) => x.meta_status === "paused")
    const listed = listCalls(channel)
    assert.strictEqual(listed.length, 1)
    assert.deepStrictEqual(listed[0].query, { fields: "id,name,language,status,rejected_reason", limit: "100" })
    assert.strictEqual(listed[0].headers.authorization, `Bearer ${channel.access_token}`)
    assert.strictEqual((await eventsOf(a.token, t.id)).filter((e) => e.type === "meta_paused").length, 1)
    const paused = await sendTemplate(server, a.token, {
      channel_id: channel.id,
      template_id: t.template_group_id,
      to: { phone: "+12022239999" },
      variables: { first_name: "Bo", order_id: "Z-9" }
    })
    assert.strictEqual(paused.status, 422)
    assert.ok(paused.body.errors.template_id)

    // Rejected with a reason, through the webhook.
    await notify(channel, wa.decide(externalId, "REJECTED", "INVALID_FORMAT"))
    const rejected = await call("GET", `/v1/templates/${t.id}`, a.token)
    assert.strictEqual(rejected.body.data.meta_status, "rejected")
    assert.strictEqual(rejected.body.data.meta_status_reason, "INVALID_FORMAT")
    const rejectedEvent = (await payloadsOf(server, a.id, "template.meta_rejected")).at(-1)
    assert.strictEqual(rejectedEvent.reason, "INVALID_FORMAT")

    // Fixing the draft and resubmitting edits the same Meta template.
    const fixed = await call("PATCH", `/v1/templates/${t.id}`, a.token, { footer_text: "Reply STOP to unsubscribe" })
    assert.strictEqual(fixed.body.data.meta_status, "local")
    const resubmitted = await call("POST", `/v1/templates/${t.id}/submit`, a.token)
    assert.strictEqual(resubmitted.body.data.template.meta_status, "pending")
    assert.strictEqual(resubmitted.body.data.template.external_id, externalId)
    assert.strictEqual(wa.http.calls("POST template").at(-1)!.path, `/${externalId}`)
    assert.strictEqual(wa.templates.get(externalId)!.status, "PENDING")

    // Delete removes it from Meta too, so a sync cannot bring it back.
    const deleted = await call("DELETE", `/v1/templates/${t.id}`, a.token)
    assert.strictEqual(deleted.status, 200)
    const removal = wa.http.calls("DELETE message_templates").at(-1)!
    assert.deepStrictEqual(removal.query, { name: "shipping_notice", hsm_id: externalId })
    assert.ok(!wa.templates.has(externalId))
  })

  it("a provider refusal leaves the instance as it was and is reported per instance; deletion is best effort", async () => {
    const a = await createCompany(server)
    const channel = await whatsappChannel(a.token)
    const t = await createTemplate(server, a.token, [channel.id])
    wa.http.inject("POST message_templates", { status: 400, body: { error: { message: "(#100) Invalid parameter", code: 100 } } })
    const refused = await call("POST", `/v1/templates/${t.id}/submit`, a.token)
    assert.strictEqual(refused.status, 200)
    assert.strictEqual(refused.body.data.template.meta_status, "local")
    assert.match(refused.body.data.results[0].error, /Invalid parameter/)

    const ok = await call("POST", `/v1/templates/${t.id}/submit`, a.token)
    const externalId = ok.body.data.template.external_id
    wa.http.inject("DELETE message_templates", { status: 500, body: { error: { message: "down", code: 1 } } })
    assert.strictEqual((await call("DELETE", `/v1/templates/${t.id}`, a.token)).status, 200)
    assert.ok(wa.templates.has(externalId))
  })

  it("a channel without a business account id cannot submit", async () => {
    const a = await createCompany(server)
    const token = `EAA${unique("t").replace(/\W/g, "")}`
    wa.tokens.add(token)
    const res = await call("POST", "/v1/channels", a.token, {
      type: "msgr_a_business",
      provider: "whatsapp_cloud",
      name: "WA",
      credentials: { access_token: token, phone_number_id: "123", app_secret: "s", verify_token: "v" }
    })
    const t = await createTemplate(server, a.token, [res.body.data.id])
    const submitted = await call("POST", `/v1/templates/${t.id}/submit`, a.token)
    assert.match(submitted.body.data.results[0].error, /business_account_id/)
    const bad = await call("POST", "/v1/channels", a.token, {
      type: "msgr_a_business",
      provider: "whatsapp_cloud",
      name: "WA",
      credentials: { access_token: token, phone_number_id: "123", business_account_id: "abc", app_secret: "s", verify_token: "v" }
    })
    assert.strictEqual(bad.status, 422)
    assert.ok(bad.body.errors["credentials.business_account_id"])
  })
})

describe("sync as a job that pages the provider's template list", () => {
  const getTemplate = async (token: string, id: number) => (await call("GET", `/v1/templates/${id}`, token)).body.data

  const submitted = async (token: string, channelId: number) => {
    const t = await createTemplate(server, token, [channelId])
    const res = await call("POST", `/v1/templates/${t.id}/submit`, token)
    assert.strictEqual(res.body.data.template.meta_status, "pending", JSON.stringify(res.body))
    return { id: t.id as number, externalId: res.body.data.template.external_id as string }
  }

  it("reads ceil(N / page size) pages for N instances on a channel, not N; what Meta no longer lists is left as is", async () => {
    const a = await createCompany(server)
    const channel = await whatsappChannel(a.token)
    const instances: Array<{ id: number; externalId: string }> = []
    for (let i = 0; i < 6; i++) instances.push(await submitted(a.token, channel.id))
    for (const t of instances) wa.decide(t.externalId, "APPROVED")
    const [gone, ...listed] = instances
    wa.templates.delete(gone.externalId)
    const goneBefore = await getTemplate(a.token, gone.id)

    wa.pageLimit = 2
    try {
      const { first } = await syncThen(server, a.token, async () => {
        const all = await Promise.all(listed.map((t) => getTemplate(a.token, t.id)))
        return all.every((t) => t.meta_status === "approved") ? all : undefined
      })
      assert.deepStrictEqual(first, { message: "Template sync started.", already_queued: false })
    } finally {
      wa.pageLimit = 100
    }
    const pages = listCalls(channel)
    assert.strictEqual(pages.length, Math.ceil(listed.length / 2))
    assert.strictEqual(pages[0].query.after, undefined)
    assert.isString(pages[1].query.after)
    assert.notStrictEqual(pages[2].query.after, pages[1].query.after)
    assert.strictEqual(wa.http.calls("GET template").filter((c) => instances.some((t) => c.path === `/${t.externalId}`)).length, 0)
    const goneAfter = await getTemplate(a.token, gone.id)
    assert.strictEqual(goneAfter.meta_status, "pending")
    assert.strictEqual(goneAfter.last_synced_at, goneBefore.last_synced_at)
    assert.strictEqual((await payloadsOf(server, a.id, "template.meta_approved")).length, listed.length)

    // Another company's sync reads its own account only and touches none of these.
    const b = await createCompany(server)
    const bChannel = await whatsappChannel(b.token)
    const bTemplate = await submitted(b.token, bChannel.id)
    wa.decide(bTemplate.externalId, "REJECTED", "INVALID_FORMAT")
    const bSynced = await syncUntil(server, b.token, bTemplate.id, (x) => x.meta_status === "rejected")
    assert.strictEqual(bSynced.meta_status_reason, "INVALID_FORMAT")
    assert.strictEqual(listCalls(bChannel).length, 1)
    assert.strictEqual(listCalls(channel).length, pages.length)
    assert.strictEqual((await getTemplate(a.token, gone.id)).last_synced_at, goneBefore.last_synced_at)
    assert.strictEqual((await call("GET", `/v1/templates/${gone.id}`, b.token)).status, 404)
  })

  it("a failing provider is retried by the job; a request while it waits queues no other and brings it forward", async () => {
    // The sandbox fails every call while `sandbox_fail` is set; it answers the same in every server process.
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_a_business")
    const t = await createTemplate(server, a.token, [channel])
    await call("POST", `/v1/templates/${t.id}/submit`, a.token)
    await query(server, "UPDATE channels SET settings = settings || '{\"sandbox_fail\": true}'::jsonb WHERE company_id = $1 AND id = $2", [a.id, channel])
    const jobsOf = () =>
      query<{ status: string; attempts: number; error: string | null }>(
        server,
        "SELECT status, attempts, error FROM jobs WHERE company_id = $1 AND kind = 'template.sync' ORDER BY id",
        [a.id]
      )

    const first = await call("POST", "/v1/templates/sync", a.token)
    assert.deepStrictEqual([first.status, first.body.data.already_queued], [202, false])
    const waiting = await eventually(async () => {
      const rows = await jobsOf()
      return rows[0]?.status === "queued" && rows[0].attempts === 1 ? rows[0] : undefined
    })
    assert.match(waiting.error ?? "", new RegExp(`channel ${channel}: The channel is offline`))
    assert.strictEqual((await getTemplate(a.token, t.id)).meta_status, "pending")

    await query(server, "UPDATE channels SET settings = settings - 'sandbox_fail' WHERE company_id = $1 AND id = $2", [a.id, channel])
    const again = await call("POST", "/v1/templates/sync", a.token)
    assert.deepStrictEqual([again.status, again.body.data.already_queued], [202, true])
    const rows = await eventually(async () => {
      const all = await jobsOf()
      return all.every((r) => r.status === "finished") ? all : undefined
    })
    assert.deepStrictEqual(rows.map((r) => [r.status, r.attempts]), [["finished", 2]])
    assert.strictEqual((await getTemplate(a.token, t.id)).meta_status, "approved")
    assert.strictEqual((await eventsOf(a.token, t.id)).filter((e) => e.type === "meta_approved").length, 1)
  })
})

describe("moderation on the sandbox", () => {
  it("manual review: sync leaves it pending, sandbox/template-status decides (rejection with reason, then approval)", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_a_business", { settings: { template_review: "manual" } })
    const t = await createTemplate(server, a.token, [channel])
    const submitted = (await call("POST", `/v1/templates/${t.id}/submit`, a.token)).body.data.template
    const synced = await syncUntil(server, a.token, t.id, (x) => x.last_synced_at !== submitted.last_synced_at)
    assert.strictEqual(synced.meta_status, "pending")

    const rejected = await call("POST", `/v1/channels/${channel}/sandbox/template-status`, a.token, {
      template_id: t.id,
      meta_status: "rejected",
      reason: "Body looks like marketing"
    })
    assert.strictEqual(rejected.status, 200, JSON.stringify(rejected.body))
    assert.strictEqual(rejected.body.data.meta_status, "rejected")
    assert.strictEqual(rejected.body.data.meta_status_reason, "Body looks like marketing")
    const publish = await call("POST", `/v1/templates/${t.id}/publish`, a.token)
    assert.strictEqual(publish.body.error_code, "template_not_approved")

    const approved = await call("POST", `/v1/channels/${channel}/sandbox/template-status`, a.token, { template_id: t.id, meta_status: "approved" })
    assert.strictEqual(approved.body.data.meta_status, "approved")
    assert.strictEqual(approved.body.data.meta_status_reason, null)
    const events = await eventsOf(a.token, t.id)
    assert.deepStrictEqual(events.map((e) => [e.type, e.reason]), [
      ["created", null],
      ["submitted", null],
      ["meta_rejected", "Body looks like marketing"],
      ["meta_approved", null]
    ])

    // Its 422s and 404s.
    const other = await createTemplate(server, a.token, [channel])
    const unsubmitted = await call("POST", `/v1/channels/${channel}/sandbox/template-status`, a.token, { template_id: other.id, meta_status: "approved" })
    assert.strictEqual(unsubmitted.status, 422)
    assert.ok(unsubmitted.body.errors.template_id)
    const badStatus = await call("POST", `/v1/channels/${channel}/sandbox/template-status`, a.token, { template_id: t.id, meta_status: "great" })
    assert.strictEqual(badStatus.status, 422)
    const wa2 = await whatsappChannel(a.token)
    const notSandbox = await call("POST", `/v1/channels/${wa2.id}/sandbox/template-status`, a.token, { template_id: t.id, meta_status: "approved" })
    assert.strictEqual(notSandbox.body.error_code, "channel_not_sandbox")
    const b = await createCompany(server)
    const foreign = await call("POST", `/v1/channels/${channel}/sandbox/template-status`, b.token, { template_id: t.id, meta_status: "approved" })
    assert.strictEqual(foreign.status, 404)
    const bChannel = await createChannel(server, b.token, "msgr_a_business")
    const foreignTemplate = await call("POST", `/v1/channels/${bChannel}/sandbox/template-status`, b.token, { template_id: t.id, meta_status: "approved" })
    assert.strictEqual(foreignTemplate.status, 422)
    assert.strictEqual((await call("GET", `/v1/templates/${t.id}`, a.token)).body.data.meta_status, "approved")
  })
})

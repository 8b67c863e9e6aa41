import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { WhatsAppFake } from "../fakes/WhatsAppFake.ts"
import { unique } from "../support/Ids.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { createTemplate, sendTemplate, syncUntil } from "../templates/support.ts"
import { audience, broadcastBody, queryOf, recipientsOf, waitFor } from "./support.ts"

const wa = new WhatsAppFake()
let server: RunningServer
beforeAll(async () => {
  await wa.http.start()
  server = await startServer({ whatsappApiBase: wa.http.url })
})
afterAll(async () => {
  await server?.close()
  await wa.http.close()
})

const db = () => queryOf(server)
const post = (token: string, path: string, body?: unknown) => request(server, "POST", path, { token, body })

/** A WhatsApp Cloud channel of the company with a template approved on it by the fake's reviewer. */
const whatsappWithTemplate = async (token: string) => {
  const credentials = {
    access_token: `EAA${unique("tok").replace(/\W/g, "")}`,
    phone_number_id: String(Math.floor(Math.random() * 1e9)),
    business_account_id: String(Math.floor(Math.random() * 1e9)),
    app_secret: "limit-app-secret",
    verify_token: "verify"
  }
  wa.tokens.add(credentials.access_token)
  const made = await post(token, "/v1/channels", { type: "msgr_a_business", provider: "whatsapp_cloud", name: "WA", credentials })
  assert.strictEqual(made.status, 201, JSON.stringify(made.body))
  const channelId = made.body.data.id as number
  const template = await createTemplate(server, token, [channelId])
  const submitted = await post(token, `/v1/templates/${template.id}/submit`)
  assert.strictEqual(submitted.status, 200, JSON.stringify(submitted.body))
  wa.decide(submitted.body.data.template.external_id, "APPROVED")
  await syncUntil(server, token, template.id, (t) => t.meta_status === "approved")
  return { channelId, groupId: template.template_group_id as number }
}

/** The contact's thread on the channel, its last inbound message an hour ago: inside the 24-hour window. */
const wroteRecently = async (companyId: number, channelId: number, contactId: number) => {
  const [account] = await db()("SELECT id, external_id FROM contact_accounts WHERE company_id = $1 AND contact_id = $2", [companyId, contactId])
  const [conversation] = await db()("INSERT INTO conversations (company_id, contact_id) VALUES ($1, $2) RETURNING id", [companyId, contactId])
  await db()(
    `INSERT INTO threads (company_id, conversation_id, channel_id, contact_account_id, external_thread_id, last_inbound_at)
     VALUES ($1, $2, $3, $4, $5, now() - interval '1 hour')`,
    [companyId, conversation.id, channelId, account.id, account.external_id]
  )
}

const estimate = async (token: string, segmentId: string, channelIds: ReadonlyArray<number>) => {
  const res = await post(token, "/v1/broadcasts/estimate", { segment_id: segmentId, channel_ids: channelIds })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data
}

describe("the WhatsApp messaging limit in broadcasts", () => {
  it("skips template recipients beyond the limit with messaging_limit, lets the window's contacts through, and the estimate shows it", async () => {
    const company = await createCompany(server)
    const { channelId, groupId } = await whatsappWithTemplate(company.token)
    const { segmentId, contactIds } = await audience(server, db(), company, 6, { channelTypes: ["msgr_a_business"] })
    await wroteRecently(company.id, channelId, contactIds[0])

    const unlimited = await estimate(company.token, segmentId, [channelId])
    assert.deepStrictEqual(unlimited.messaging_limits, [])
    assert.strictEqual(unlimited.reachable_contacts, 6)

    await db()(`UPDATE channels SET settings = settings || '{"messaging_limit": 3}'::jsonb WHERE id = $1`, [channelId])
    const before = await estimate(company.token, segmentId, [channelId])
    assert.include(before, { total_contacts: 6, reachable_contacts: 6, excluded_contacts: 0 })
    assert.deepStrictEqual(before.messaging_limits, [{ channel_id: channelId, limit: 3, contacted_last_24h: 0, remaining: 3, beyond: 2 }])

    const sentBefore = wa.http.calls("POST messages").length
    const created = await post(company.token, "/v1/broadcasts", broadcastBody(segmentId, [channelId], {
      content: { channels: [{ type: "template", channelId, templateId: groupId, language: "en", variables: { order_id: "A-1" } }] }
    }))
    assert.strictEqual(created.status, 201, JSON.stringify(created.body))
    const done = await waitFor(server, company.token, created.body.data.id, (x) => x.status === "completed" || x.status === "failed")
    const recipients = await recipientsOf(db(), done.id)
    assert.strictEqual(done.status, "completed", JSON.stringify(recipients))
    assert.deepStrictEqual(
      recipients.map((r) => [r.contact_id, r.status, r.error_message]),
      contactIds.map((id, i) => [id, i < 4 ? "sent" : "skipped", i < 4 ? null : "messaging_limit"]),
      "the window's contact passes uncounted; the first three outside it are admitted in claim order"
    )
    assert.strictEqual(wa.http.calls("POST messages").length - sentBefore, 4)
    assert.include(done.stats, { sent: 4, skipped: 2 })
    const listed = await request(server, "GET", `/v1/broadcasts/${done.id}/messages?status=skipped`, { token: company.token })
    assert.strictEqual(listed.status, 200, JSON.stringify(listed.body))
    assert.deepStrictEqual(listed.body.data.map((r: any) => r.error_message), ["messaging_limit", "messaging_limit"])

    const after = await estimate(company.token, segmentId, [channelId])
    assert.deepStrictEqual(after.messaging_limits, [{ channel_id: channelId, limit: 3, contacted_last_24h: 3, remaining: 0, beyond: 2 }])

    // A single template send outside the window is not refused, and counts.
    const single = await sendTemplate(server, company.token, {
      channel_id: channelId,
      template_id: groupId,
      to: { phone: "+12025550199" },
      variables: { first_name: "Bo", order_id: "Z-9" }
    })
    assert.strictEqual(single.status, 201, JSON.stringify(single.body))
    assert.strictEqual((await estimate(company.token, segmentId, [channelId])).messaging_limits[0].contacted_last_24h, 4)
  })

  it("treats another company's channel as unknown in the estimate (422) and its broadcast's recipients as not found (404)", async () => {
    const owner = await createCompany(server)
    const { channelId } = await whatsappWithTemplate(owner.token)
    await db()(`UPDATE channels SET settings = settings || '{"messaging_limit": 250}'::jsonb WHERE id = $1`, [channelId])
    const mine = await audience(server, db(), owner, 1, { channelTypes: ["msgr_a_business"] })
    const draft = await post(owner.token, "/v1/broadcasts", broadcastBody(mine.segmentId, [channelId], { is_draft: true }))
    assert.strictEqual(draft.status, 201, JSON.stringify(draft.body))

    const other = await createCompany(server)
    const { segmentId } = await audience(server, db(), other, 2, { channelTypes: ["msgr_a_business"] })
    const res = await post(other.token, "/v1/broadcasts/estimate", { segment_id: segmentId, channel_ids: [channelId] })
    assert.strictEqual(res.status, 422, JSON.stringify(res.body))
    assert.isArray(res.body.errors.channel_ids)
    assert.notProperty(res.body, "data")
    const foreign = await request(server, "GET", `/v1/broadcasts/${draft.body.data.id}/messages?status=skipped`, { token: other.token })
    assert.strictEqual(foreign.status, 404, JSON.stringify(foreign.body))
  })
})

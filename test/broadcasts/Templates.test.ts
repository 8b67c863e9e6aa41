import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { createChannel as createApiChannel } from "../messages/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { approvedTemplate, createTemplate } from "../templates/support.ts"
import { audience, broadcastBody, queryOf, recipientsOf, waitFor } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const post = (token: string, path: string, body?: unknown) => request(server, "POST", path, { token, body })

const templateContent = (channelId: number, templateId: number, variables: Record<string, string> = {}) => ({
  channels: [{ type: "template", channelId, templateId, language: "en", variables }]
})

describe("broadcasts with template content", () => {
  it("refuses create (mode now), publish and run without an approved template on the channel, with the spec's text", async () => {
    const company = await createCompany(server)
    const channelId = await createApiChannel(server, company.token, "msgr_a_business")
    const template = await createTemplate(server, company.token, [channelId])
    const [channel] = await query(server, "SELECT name FROM channels WHERE id = $1", [channelId])
    const { segmentId } = await audience(server, queryOf(server), company, 1, { channelTypes: ["msgr_a_business"] })
    const expected = `Channel '${channel.name}' has no approved template '${template.slug}' (language en). ` +
      "Approve this template for the channel or pick a channel where it is approved."
    const body = broadcastBody(segmentId, [channelId], { content: templateContent(channelId, template.template_group_id) })

    const now = await post(company.token, "/v1/broadcasts", body)
    assert.strictEqual(now.status, 422, JSON.stringify(now.body))
    assert.strictEqual(now.body.errors.content[0], expected)

    const draft = await post(company.token, "/v1/broadcasts", { ...body, is_draft: true })
    assert.strictEqual(draft.status, 201)
    const publish = await post(company.token, `/v1/broadcasts/${draft.body.data.id}/publish`)
    assert.strictEqual(publish.status, 422)
    assert.strictEqual(publish.body.errors.content[0], expected)
    assert.strictEqual((await request(server, "GET", `/v1/broadcasts/${draft.body.data.id}`, { token: company.token })).body.data.status, "draft")

    const later = await post(company.token, "/v1/broadcasts", { ...body, schedule: { mode: "later", scheduledAt: new Date(Date.now() + 3600_000).toISOString() } })
    assert.strictEqual(later.status, 201, "the check applies at create only with mode now")
    const run = await post(company.token, `/v1/broadcasts/${later.body.data.id}/run`)
    assert.strictEqual(run.status, 422)
    assert.strictEqual(run.body.errors.content[0], expected)
  })

  it("sends an approved template to every recipient, with contact variables rendered", async () => {
    const company = await createCompany(server)
    const { channelId, groupId } = await approvedTemplate(server, company.token)
    const { segmentId, contactIds } = await audience(server, queryOf(server), company, 3, { channelTypes: ["msgr_a_business"], firstName: "Bea" })
    const created = await post(company.token, "/v1/broadcasts", broadcastBody(segmentId, [channelId], {
      content: templateContent(channelId, groupId, { order_id: "for {{first_name}}" })
    }))
    assert.strictEqual(created.status, 201, JSON.stringify(created.body))
    const done = await waitFor(server, company.token, created.body.data.id, (x) => x.status === "completed" || x.status === "failed")
    assert.strictEqual(done.status, "completed", JSON.stringify(await recipientsOf(queryOf(server), done.id)))
    assert.strictEqual(done.stats.sent, 3)
    const meta = await request(server, "GET", "/v1/broadcasts/meta", { token: company.token })
    assert.strictEqual(meta.status, 200, JSON.stringify(meta.body))
    assert.deepStrictEqual(meta.body.data.templates.map((t: any) => [t.id, t.channels]), [[groupId, [{ channel_id: channelId, language: "en" }]]])
    assert.include(meta.body.data.variables, "first_name")
    assert.include(meta.body.data.segments.map((s: any) => s.id), segmentId)
    const messages = await query(server,
      `SELECT m.message_type, m.message_content, r.contact_id FROM broadcast_recipients r JOIN messages m ON m.id = r.message_id
       WHERE r.broadcast_id = $1 ORDER BY r.contact_id`, [done.id])
    assert.deepStrictEqual(messages.map((m) => m.message_type), ["template", "template", "template"])
    messages.forEach((m, i) => {
      assert.strictEqual(m.contact_id, contactIds[i])
      assert.match(m.message_content, /^Hi Bea\d+, your order for Bea\d+ has shipped\.$/)
    })
  })

  it("treats another company's template as unknown: 422 on content, nothing created, and meta lists only its own", async () => {
    const owner = await createCompany(server)
    const { groupId } = await approvedTemplate(server, owner.token)
    const company = await createCompany(server)
    const channelId = await createApiChannel(server, company.token, "msgr_a_business")
    const { segmentId } = await audience(server, queryOf(server), company, 1, { channelTypes: ["msgr_a_business"] })
    const res = await post(company.token, "/v1/broadcasts", broadcastBody(segmentId, [channelId], { content: templateContent(channelId, groupId) }))
    assert.strictEqual(res.status, 422, JSON.stringify(res.body))
    assert.isString(res.body.errors.content[0])
    const [{ count }] = await query(server, "SELECT count(*)::int AS count FROM broadcasts WHERE company_id = $1", [company.id])
    assert.strictEqual(count, 0)
    const meta = await request(server, "GET", "/v1/broadcasts/meta", { token: company.token })
    assert.deepStrictEqual(meta.body.data.templates, [])
  })
})

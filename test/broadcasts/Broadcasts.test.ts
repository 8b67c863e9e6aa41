import { assert, describe, it } from "@effect/vitest"
import { createServer, type Server } from "node:http"
import { afterAll, beforeAll } from "vitest"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { audience, broadcastBody, createChannel, queryOf, recipientsOf, waitFor } from "./support.ts"

let server: RunningServer
let fake: Server
let fakeCalls = 0
beforeAll(async () => {
  // A local OpenAI-compatible chat completions endpoint for the assist adapter.
  fake = createServer((req, res) => {
    let body = ""
    req.on("data", (c) => (body += c))
    req.on("end", () => {
      fakeCalls++
      const parsed = JSON.parse(body)
      const ok = req.url === "/v1/chat/completions" && req.headers.authorization === "Bearer sk-test" && parsed.model === "tiny"
      res.writeHead(ok ? 200 : 401, { "content-type": "application/json" })
      res.end(JSON.stringify(ok
        ? { choices: [{ message: { role: "assistant", content: ` Better: ${parsed.messages[1].content} ` } }], usage: { total_tokens: 42 } }
        : { error: "bad request" }))
    })
  })
  await new Promise<void>((resolve) => fake.listen(0, "127.0.0.1", resolve))
  const port = (fake.address() as { port: number }).port
  process.env.ASSIST_API_URL = `http://127.0.0.1:${port}/v1`
  process.env.ASSIST_API_KEY = "sk-test"
  process.env.ASSIST_MODEL = "tiny"
  server = await startServer({ appUrl: "https://app.example.test" })
})
afterAll(async () => {
  await server?.close()
  fake?.close()
})

const setup = async (n = 3) => {
  const company = await createCompany(server)
  const db = queryOf(server)
  const channel = await createChannel(db, company.id)
  const { segmentId, contactIds } = await audience(server, db, company, n)
  return { company, channel, segmentId, contactIds, db }
}

const post = (token: string, path: string, body?: unknown) => request(server, "POST", path, { token, body })

describe("broadcasts over HTTP", () => {
  it("creates a draft, lists, filters, updates (PATCH and POST), duplicates, publishes and deletes", async () => {
    const { company, channel, segmentId } = await setup()
    const { token } = company
    const created = await post(token, "/v1/broadcasts", broadcastBody(segmentId, [channel], { is_draft: true }))
    assert.strictEqual(created.status, 201, JSON.stringify(created.body))
    const b = created.body.data
    assert.strictEqual(b.status, "draft")
    assert.deepStrictEqual(b.audience.segmentId, segmentId)
    assert.deepStrictEqual(b.channels, [{ id: channel, mode: "specific" }])
    assert.deepStrictEqual(b.runs, [])
    assert.strictEqual(b.stats.total, 0)

    const patched = await request(server, "PATCH", `/v1/broadcasts/${b.id}`, { token, body: { name: "Renamed" } })
    assert.strictEqual(patched.status, 200, JSON.stringify(patched.body))
    assert.strictEqual(patched.body.data.name, "Renamed")
    const aliased = await post(token, `/v1/broadcasts/${b.id}`, { name: "Renamed again" })
    assert.strictEqual(aliased.body.data.name, "Renamed again")

    const copy = await post(token, `/v1/broadcasts/${b.id}/duplicate`)
    assert.strictEqual(copy.status, 201)
    assert.strictEqual(copy.body.data.status, "draft")
    assert.strictEqual(copy.body.data.name, "Renamed again (copy)")

    const drafts = await request(server, "GET", "/v1/broadcasts?statuses[]=draft", { token })
    assert.strictEqual(drafts.status, 200, JSON.stringify(drafts.body))
    assert.strictEqual(drafts.body.data.pagination.total, 2)

    const published = await post(token, `/v1/broadcasts/${b.id}/publish`)
    assert.strictEqual(published.status, 200, JSON.stringify(published.body))
    assert.strictEqual(published.body.data.status, "active")
    assert.strictEqual(published.body.data.runs[0].status, "processing")
    const again = await post(token, `/v1/broadcasts/${b.id}/publish`)
    assert.strictEqual(again.status, 422)

    const done = await waitFor(server, token, b.id, (x) => x.status === "completed")
    assert.strictEqual(done.stats.sent, 3)
    assert.strictEqual(done.runs[0].status, "completed")
    assert.strictEqual(done.runs[0].total, 3)
    const editLocked = await request(server, "PATCH", `/v1/broadcasts/${b.id}`, { token, body: { name: "Late" } })
    assert.strictEqual(editLocked.status, 422)

    const completed = await request(server, "GET", "/v1/broadcasts?statuses[]=completed&statuses[]=failed", { token })
    assert.deepStrictEqual(completed.body.data.items.map((x: any) => x.id), [b.id])

    const deleted = await request(server, "DELETE", `/v1/broadcasts/${copy.body.data.id}`, { token })
    assert.strictEqual(deleted.status, 200)
    assert.strictEqual((await request(server, "GET", `/v1/broadcasts/${copy.body.data.id}`, { token })).status, 404)
  })

  it("sends at once with schedule now, lists recipients with status filter and paging, and shows runs", async () => {
    const { company, channel, segmentId, contactIds } = await setup(5)
    const { token } = company
    const created = await post(token, "/v1/broadcasts", broadcastBody(segmentId, [channel]))
    assert.strictEqual(created.status, 201)
    assert.strictEqual(created.body.data.status, "active")
    const done = await waitFor(server, token, created.body.data.id, (x) => x.status === "completed")
    const id = done.id
    const page = await request(server, "GET", `/v1/broadcasts/${id}/messages?per_page=2&page=2`, { token })
    assert.strictEqual(page.status, 200, JSON.stringify(page.body))
    assert.deepStrictEqual(page.body.meta, { current_page: 2, last_page: 3, per_page: 2, total: 5 })
    assert.strictEqual(page.body.data.length, 2)
    const r = page.body.data[0]
    assert.strictEqual(r.status, "sent")
    assert.strictEqual(r.contact.id, contactIds[2])
    assert.match(r.contact.first_name, /^Ann\d+$/)
    assert.deepStrictEqual(r.channel, { id: channel, name: "Bot" })
    assert.strictEqual(r.identifier, `msgr_b-${contactIds[2]}`)
    assert.strictEqual(r.attempts, 1)

    const [message] = await query(server, "SELECT message_content FROM messages WHERE id = (SELECT message_id FROM broadcast_recipients WHERE id = $1)", [r.id])
    assert.match(message.message_content, /^Hi Ann\d+$/)

    // A provider status webhook moves the recipient to delivered, then read.
    const [ext] = await query(server, "SELECT m.external_message_id FROM messages m JOIN broadcast_recipients r ON r.message_id = m.id WHERE r.id = $1", [r.id])
    for (const status of ["delivered", "read"]) {
      const hook = await post(token, `/v1/channels/${channel}/sandbox/status`, { external_message_id: ext.external_message_id, status })
      assert.strictEqual(hook.status, 200, JSON.stringify(hook.body))
    }
    const read = await request(server, "GET", `/v1/broadcasts/${id}/messages?status=read`, { token })
    assert.strictEqual(read.body.meta.total, 1)
    assert.isNotNull(read.body.data[0].read_at)
    assert.isNotNull(read.body.data[0].delivered_at)

    // A reply from the recipient on that channel sets replied_at.
    const inbound = await post(token, `/v1/channels/${channel}/sandbox/inbound`, { from: { external_id: r.identifier }, text: "Thanks!" })
    assert.strictEqual(inbound.status, 201, JSON.stringify(inbound.body))
    const after = await request(server, "GET", `/v1/broadcasts/${id}`, { token })
    assert.strictEqual(after.body.data.stats.read, 1)
    assert.strictEqual(after.body.data.stats.delivered, 1)
    assert.strictEqual(after.body.data.stats.replied, 1)

    const runs = await request(server, "GET", `/v1/broadcasts/${id}/runs`, { token })
    assert.strictEqual(runs.body.data.length, 1)
    const run = await request(server, "GET", `/v1/broadcasts/${id}/runs/${runs.body.data[0].id}`, { token })
    assert.strictEqual(run.status, 200)
    assert.include(run.body.data, { status: "completed", total: 5, sent: 5, failed: 0, skipped: 0, delivered: 1, read: 1 })
    assert.isNotNull(run.body.data.completed_at)
  })

  it("refuses invalid input with the 422 field shape", async () => {
    const { company, channel, segmentId } = await setup(1)
    const other = await createChannel(queryOf(server), (await createCompany(server)).id)
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ audience: { segmentId: "999999999" } }, "audience.segmentId"],
      [{ channels: { mode: "specific", channelIds: [other] }, content: { channels: [{ type: "text", channelId: other, text: "x" }] } }, "channels.channelIds"],
      [{ content: { channels: [{ type: "text", channelId: channel, variants: [{ key: "a", text: "A" }] }] } }, "content.channels.0.variants"],
      [{ content: { channels: [{ type: "text", channelId: channel }] } }, "content.channels.0.text"],
      [{ schedule: { mode: "later" } }, "schedule.scheduledAt"],
      [{ recurrence: { rrule: "FREQ=SOMETIMES" } }, "recurrence.rrule"],
      [{ schedule: { mode: "now", rateControl: { enabled: true, jitterMinSeconds: 5, jitterMaxSeconds: 1 } } }, "schedule.rateControl.jitterMaxSeconds"]
    ]
    for (const [override, field] of cases) {
      const res = await post(company.token, "/v1/broadcasts", broadcastBody(segmentId, [channel], override))
      assert.strictEqual(res.status, 422, `${field}: ${JSON.stringify(res.body)}`)
      assert.property(res.body.errors, field, JSON.stringify(res.body))
    }
  })

  it("schedules later, runs on request, cancels a one-off and refuses cancel on a recurring one", async () => {
    const { company, channel, segmentId } = await setup(2)
    const { token } = company
    const later = new Date(Date.now() + 3600_000).toISOString()
    const scheduled = await post(token, "/v1/broadcasts", broadcastBody(segmentId, [channel], { schedule: { mode: "later", scheduledAt: later } }))
    assert.strictEqual(scheduled.body.data.status, "scheduled")
    const ran = await post(token, `/v1/broadcasts/${scheduled.body.data.id}/run`)
    assert.strictEqual(ran.status, 200, JSON.stringify(ran.body))
    assert.strictEqual(ran.body.data.status, "active")
    await waitFor(server, token, scheduled.body.data.id, (x) => x.status === "completed")

    const toCancel = await post(token, "/v1/broadcasts", broadcastBody(segmentId, [channel], { schedule: { mode: "later", scheduledAt: later } }))
    const cancelled = await post(token, `/v1/broadcasts/${toCancel.body.data.id}/cancel`)
    assert.strictEqual(cancelled.status, 200)
    assert.strictEqual(cancelled.body.data.status, "cancelled")
    assert.strictEqual((await post(token, `/v1/broadcasts/${toCancel.body.data.id}/cancel`)).status, 422)
    assert.strictEqual((await post(token, `/v1/broadcasts/${toCancel.body.data.id}/run`)).status, 422)

    const recurring = await post(token, "/v1/broadcasts", broadcastBody(segmentId, [channel], { recurrence: { rrule: "FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0", timezone: "Europe/Berlin" } }))
    assert.strictEqual(recurring.body.data.status, "scheduled")
    assert.strictEqual(recurring.body.data.recurring_schedule.timezone, "Europe/Berlin")
    assert.isNotNull(recurring.body.data.recurring_schedule.next_run_at)
    assert.strictEqual((await post(token, `/v1/broadcasts/${recurring.body.data.id}/cancel`)).status, 422)
    const paused = await post(token, `/v1/broadcasts/${recurring.body.data.id}/pause-recurring`)
    assert.strictEqual(paused.body.data.recurring_schedule.paused, true)
    const resumed = await post(token, `/v1/broadcasts/${recurring.body.data.id}/resume-recurring`)
    assert.strictEqual(resumed.body.data.recurring_schedule.paused, false)
    assert.strictEqual((await post(token, `/v1/broadcasts/${toCancel.body.data.id}/pause-recurring`)).status, 422)
  })

  it("estimates the audience: opted-out, blocked and unreachable contacts are excluded", async () => {
    const { company, channel, segmentId, contactIds, db } = await setup(6)
    await db("UPDATE contacts SET opted_out_at = now() WHERE id = $1", [contactIds[0]])
    await db("UPDATE contacts SET blocked_at = now() WHERE id = $1", [contactIds[1]])
    await db("DELETE FROM contact_accounts WHERE contact_id = $1", [contactIds[2]])
    const res = await post(company.token, "/v1/broadcasts/estimate", {
      segment_id: segmentId,
      channel_ids: [channel],
      schedule: { mode: "now", rateControl: { enabled: true, messagesPerMinute: 60 } }
    })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.include(res.body.data, { total_contacts: 6, reachable_contacts: 3, excluded_contacts: 3, estimated_duration_seconds: 3 })
    assert.isString(res.body.data.estimated_completion)
    const bad = await post(company.token, "/v1/broadcasts/estimate", { segment_id: "0", channel_ids: [channel] })
    assert.strictEqual(bad.status, 422)

    // The snapshot applies the same rules.
    const created = await post(company.token, "/v1/broadcasts", broadcastBody(segmentId, [channel]))
    await waitFor(server, company.token, created.body.data.id, (x) => x.status === "completed")
    const recipients = await recipientsOf(db, created.body.data.id)
    assert.deepStrictEqual(recipients.map((r) => r.contact_id), contactIds.slice(3))
  })

  it("gives each recipient the first selected channel it has an account on", async () => {
    const company = await createCompany(server)
    const db = queryOf(server)
    const bot = await createChannel(db, company.id, { type: "msgr_b", name: "Bot" })
    const other = await createChannel(db, company.id, { type: "msgr_c_business", name: "Page" })
    const both = await audience(server, db, company, 2, { channelTypes: ["msgr_b", "msgr_c_business"] })
    await db("DELETE FROM contact_accounts WHERE contact_id = $1 AND channel_type = 'msgr_c_business'", [both.contactIds[1]])
    const body = broadcastBody(both.segmentId, [other, bot], { is_draft: true })
    const created = await post(company.token, "/v1/broadcasts", body)
    assert.strictEqual(created.status, 201, JSON.stringify(created.body))
    await post(company.token, `/v1/broadcasts/${created.body.data.id}/publish`)
    await waitFor(server, company.token, created.body.data.id, (x) => x.runs[0]?.total === 2)
    const recipients = await recipientsOf(db, created.body.data.id)
    assert.deepStrictEqual(recipients.map((r) => [r.contact_id, r.channel_id]), [[both.contactIds[0], other], [both.contactIds[1], bot]])
  })

  it("tracks clicks: links become /r/{code}, the first click is recorded, every click redirects", async () => {
    const { company, channel, segmentId } = await setup(1)
    const body = broadcastBody(segmentId, [channel], {
      content: {
        channels: [{ type: "text", channelId: channel, text: "Sale at https://shop.example.com/sale?x=1 now" }],
        settings: { trackClicks: true, includeOptOut: true }
      }
    })
    const created = await post(company.token, "/v1/broadcasts", body)
    const done = await waitFor(server, company.token, created.body.data.id, (x) => x.status === "completed")
    const [message] = await query(server, "SELECT message_content FROM messages WHERE id = (SELECT message_id FROM broadcast_recipients WHERE broadcast_id = $1)", [done.id])
    const match = /^Sale at https:\/\/app\.example\.test\/r\/([0-9A-Za-z]{10,}) now\n\nReply STOP to unsubscribe$/.exec(message.message_content)
    assert.isNotNull(match, message.message_content)
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${server.url}/r/${match![1]}`, { redirect: "manual" })
      assert.strictEqual(res.status, 302)
      assert.strictEqual(res.headers.get("location"), "https://shop.example.com/sale?x=1")
    }
    const [link] = await query(server, "SELECT clicks, clicked_at FROM broadcast_links WHERE code = $1", [match![1]])
    assert.strictEqual(link.clicks, 2)
    const after = await request(server, "GET", `/v1/broadcasts/${done.id}`, { token: company.token })
    assert.strictEqual(after.body.data.stats.clicked, 1)
    const recipient = await request(server, "GET", `/v1/broadcasts/${done.id}/messages`, { token: company.token })
    assert.isNotNull(recipient.body.data[0].clicked_at)
    assert.strictEqual((await fetch(`${server.url}/r/Unknown00000`, { redirect: "manual" })).status, 404)
  })

  it("sends a test message and answers assist through the OpenAI-compatible adapter, 60 per hour", async () => {
    const { company, channel } = await setup(0)
    const sent = await post(company.token, "/v1/broadcasts/test", { channel_id: channel, recipient: "tg-42", content: { type: "text", text: "Test" } })
    assert.strictEqual(sent.status, 200, JSON.stringify(sent.body))
    assert.strictEqual(sent.body.data.message, "Test message sent.")
    assert.isNumber(sent.body.data.message_id)

    const before = fakeCalls
    const answer = await post(company.token, "/v1/broadcasts/assist", { action: "improve", text: "buy now", locale: "en" })
    assert.strictEqual(answer.status, 200, JSON.stringify(answer.body))
    assert.deepStrictEqual(answer.body.data, { text: "Better: buy now", action: "improve", tokens_used: 42 })
    assert.strictEqual(fakeCalls, before + 1)
    for (let i = 1; i < 60; i++) assert.strictEqual((await post(company.token, "/v1/broadcasts/assist", { action: "generate", text: "x" })).status, 200)
    const limited = await post(company.token, "/v1/broadcasts/assist", { action: "generate", text: "x" })
    assert.strictEqual(limited.status, 429)
    assert.isNotNull(limited.headers.get("retry-after"))
  })

  it("needs the broadcasts plan feature", async () => {
    const free = await createCompany(server, { plan: "free" })
    const res = await request(server, "GET", "/v1/broadcasts", { token: free.token })
    assert.strictEqual(res.status, 403)
    assert.strictEqual(res.body.error, "feature_not_available")
    assert.strictEqual(res.body.feature, "broadcasts")
  })

  it("answers 404 for another company's broadcast and run on every route", async () => {
    const { company, channel, segmentId } = await setup(1)
    const created = await post(company.token, "/v1/broadcasts", broadcastBody(segmentId, [channel]))
    const done = await waitFor(server, company.token, created.body.data.id, (x) => x.status === "completed")
    const id = done.id
    const runId = done.runs[0].id
    const b = await createCompany(server)
    const routes: Array<[string, string, unknown?]> = [
      ["GET", `/v1/broadcasts/${id}`],
      ["PATCH", `/v1/broadcasts/${id}`, { name: "x" }],
      ["POST", `/v1/broadcasts/${id}`, { name: "x" }],
      ["DELETE", `/v1/broadcasts/${id}`],
      ["POST", `/v1/broadcasts/${id}/duplicate`],
      ["POST", `/v1/broadcasts/${id}/publish`],
      ["POST", `/v1/broadcasts/${id}/cancel`],
      ["POST", `/v1/broadcasts/${id}/run`],
      ["GET", `/v1/broadcasts/${id}/messages`],
      ["GET", `/v1/broadcasts/${id}/runs`],
      ["GET", `/v1/broadcasts/${id}/runs/${runId}`],
      ["POST", `/v1/broadcasts/${id}/pause-recurring`],
      ["POST", `/v1/broadcasts/${id}/resume-recurring`],
      ["POST", `/v1/broadcasts/${id}/runs/${runId}/pause`],
      ["POST", `/v1/broadcasts/${id}/runs/${runId}/resume`],
      ["POST", `/v1/broadcasts/${id}/runs/${runId}/cancel`],
      ["POST", `/v1/broadcasts/${id}/runs/${runId}/retry-failed`]
    ]
    for (const [method, path, body] of routes) {
      const res = await request(server, method, path, { token: b.token, body })
      assert.strictEqual(res.status, 404, `${method} ${path}: ${JSON.stringify(res.body)}`)
    }
    // Another company's segment and channel are not usable either.
    const foreign = await post(b.token, "/v1/broadcasts/estimate", { segment_id: segmentId, channel_ids: [channel] })
    assert.strictEqual(foreign.status, 422)
    // A run id of the right company under another broadcast is 404 too.
    const other = await post(company.token, "/v1/broadcasts", broadcastBody(segmentId, [channel], { is_draft: true }))
    assert.strictEqual((await request(server, "GET", `/v1/broadcasts/${other.body.data.id}/runs/${runId}`, { token: company.token })).status, 404)
  })
})

import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { createServer, type Server } from "node:http"
import { AutomationsRepo } from "../../src/automations/Repo.ts"
import { Runs } from "../../src/automations/Runs.ts"
import { afterAll, beforeAll } from "vitest"
import { createContact } from "../contacts/support.ts"
import { dealSetup } from "../deals/support.ts"
import { tone } from "../media/support.ts"
import { createChannel, inbound } from "../messages/support.ts"
import { freshDatabase } from "../support/Databases.ts"
import { payloadsOf, query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer, upload } from "../support/TestServer.ts"
import { actionNode, activeAutomation, chain, edge, finishedRuns, last, ok, outboundTexts, runsOf, sleep, trigger, triggerNode, waitFor } from "./support.ts"

let server: RunningServer
let database: { readonly url: string; readonly drop: () => Promise<void> } | undefined
let receiver: Server
let receiverUrl: string
const hits: Array<{ path: string; body: string }> = []

beforeAll(async () => {
  // A database of its own: a run's job may be taken by any server on its database, and only this one
  // lets the HTTP step reach the receiver on loopback.
  if (process.env.DATABASE_URL !== undefined) database = await freshDatabase(process.env.DATABASE_URL)
  server = await startServer({
    ...(database === undefined ? {} : { databaseUrl: Option.some(Redacted.make(database.url)) }),
    webhookAllowPrivate: true
  })
  receiver = createServer((req, res) => {
    let body = ""
    req.on("data", (c) => (body += c))
    req.on("end", () => {
      hits.push({ path: req.url ?? "", body })
      if (req.url?.startsWith("/fail")) {
        res.writeHead(503).end("down")
        return
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ vip: true, echo: req.url }))
    })
  })
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
  const address = receiver.address()
  receiverUrl = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`
})
afterAll(async () => {
  await server?.close()
  receiver?.close()
  await database?.drop()
})

const createTag = async (token: string, name: string) => (await ok(server, "POST", "/v1/tags", token, { name }, 201)).id as number
const tagsOf = async (contactId: number) =>
  (await query<{ tag_id: number }>(server, "SELECT tag_id FROM contact_tags WHERE contact_id = $1 ORDER BY tag_id", [contactId])).map((r) => Number(r.tag_id))
const contactOfConversation = async (conversationId: number) =>
  Number((await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [conversationId]))[0].contact_id)

describe("automation runs", () => {
  it("runs condition → add-tag → send-message on an inbound message, logs the steps with PII masked, and its own send starts nothing", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    const vip = await createTag(company.token, "vip")
    const automation = await activeAutomation(server, company.token, {
      nodes: [
        triggerNode,
        actionNode("c", "condition", { conditions: [{ type: "text_contains", value: "price" }], conditionsJoiner: "and" }),
        actionNode("tag", "add-tag", { tag_id: vip }),
        actionNode("reply", "msgr_b-send-message", { text: "Our prices are on the site." })
      ],
      edges: [edge("t", "c"), edge("c", "tag", "true"), edge("tag", "reply")]
    }, [trigger("message.created", { channelType: "msgr_b" })])

    const received = await inbound(server, company.token, channelId, {
      from: { external_id: "u-1", name: "Ann", phone: "+15551234567" },
      text: "What is the price? mail me at ann.lee@example.com or +1 555 123 4567"
    })
    const [run] = await finishedRuns(server, company.token, automation.id)
    assert.strictEqual(run.status, "succeeded", JSON.stringify(run))
    assert.deepStrictEqual(run.steps.map((s: any) => [s.node_id, s.action_id, s.status, s.attempt]), [
      ["c", "condition", "succeeded", 1],
      ["tag", "add-tag", "succeeded", 1],
      ["reply", "msgr_b-send-message", "succeeded", 1]
    ])
    assert.deepStrictEqual(run.steps[0].output, { result: true })
    assert.deepStrictEqual(
      Object.keys(run.steps[0]).sort(),
      ["action_id", "attempt", "duration_ms", "error", "finished_at", "id", "node_id", "output", "started_at", "status"]
    )
    assert.deepStrictEqual([run.version_id, run.pii_redacted, run.total_cost_usd, run.total_tokens], [automation.activeVersionId, true, 0, 0])
    assert.isNumber(run.duration_ms)
    const payload = JSON.stringify(run.trigger_payload)
    assert.notInclude(payload, "ann.lee@example.com")
    assert.notInclude(payload, "555 123 4567")
    assert.include(payload, "a***@example.com")
    assert.include(payload, "price")

    const contactId = await contactOfConversation(received.conversation_id)
    assert.deepStrictEqual(await tagsOf(contactId), [vip])
    assert.deepStrictEqual((await outboundTexts(server, received.conversation_id)).map((m) => m.message_content), ["Our prices are on the site."])
    const finished = await payloadsOf(server, company.id, "automation.run.finished")
    assert.deepStrictEqual(finished.map((p: any) => [p.automation_id, p.run_id, p.status]), [[automation.id, run.id, "succeeded"]])

    await sleep(500)
    assert.strictEqual((await runsOf(server, company.token, automation.id)).length, 1, "the automation's own message started no run")
    const after = await ok(server, "GET", `/v1/automations/${automation.id}`, company.token)
    assert.deepStrictEqual([after.executionsCount, typeof after.lastRunAt, after.healthStatus], [1, "string", "ok"])

    // The false branch has no edge: the run ends after the condition.
    await inbound(server, company.token, channelId, { from: { external_id: "u-2", name: "Bo" }, text: "hello" })
    const runs = await finishedRuns(server, company.token, automation.id, 2)
    const second = runs.find((r: any) => r.id !== run.id)!
    assert.deepStrictEqual(second.steps.map((s: any) => [s.node_id, s.output]), [["c", { result: false }]])

    // The tag step announces what it changed, once: a run that finds the tag in place emits nothing.
    const tagged = [{ contact: { id: contactId, tags: [{ id: vip, name: "vip" }] }, contact_id: contactId, changes: ["tags"] }]
    const tagEvents = async () => ({
      added: await payloadsOf(server, company.id, "tag.added"),
      updated: (await payloadsOf(server, company.id, "contact.updated")).filter((p: any) => p.changes?.includes("tags"))
    })
    assert.deepStrictEqual(await tagEvents(), { added: [{ contact_id: contactId, tag_id: vip }], updated: tagged })
    await inbound(server, company.token, channelId, { from: { external_id: "u-1", name: "Ann" }, text: "the price again?" })
    const third = (await finishedRuns(server, company.token, automation.id, 3)).find((r: any) => r.id !== run.id && r.id !== second.id)!
    assert.deepStrictEqual(third.steps.map((s: any) => [s.node_id, s.status]), [["c", "succeeded"], ["tag", "succeeded"], ["reply", "succeeded"]])
    assert.deepStrictEqual(await tagEvents(), { added: [{ contact_id: contactId, tag_id: vip }], updated: tagged })
  })

  it("starts on each trigger event, with channel filters", async () => {
    const company = await createCompany(server)
    const channelB = await createChannel(server, company.token, "msgr_b")
    const channelA = await createChannel(server, company.token, "msgr_a")
    const mark = await createTag(company.token, "mark")
    const other = await createTag(company.token, "other")
    const notify = (name: string) => chain([actionNode("n", "notify-user", { user_id: company.admin.id, message: name })])
    const flows: Record<string, any> = {}
    for (const [name, t] of [
      ["message", trigger("message.created", { channels: [channelA] })],
      ["conversation", trigger("conversation.created", { channelType: "msgr_a" })],
      ["contactCreated", trigger("contact.created")],
      ["contactUpdated", trigger("contact.updated", { conditions: [{ type: "contact_field_equals", field: "lastName", value: "Updated" }] })],
      ["dealCreated", trigger("deal.created")],
      ["stage", trigger("deal.stage_changed")],
      ["tagAdded", trigger("tag.added", { conditions: [{ type: "has_tag", value: mark }] })]
    ] as const) {
      flows[name] = await activeAutomation(server, company.token, notify(name), [t], name)
    }
    await inbound(server, company.token, channelB, { from: { external_id: "b-1", name: "B" }, text: "on b" })
    await inbound(server, company.token, channelA, { from: { external_id: "a-1", name: "A" }, text: "on a" })
    const contact = await createContact(server, company.token, { firstName: "Cy" })
    await ok(server, "PATCH", `/v1/contacts/${contact.id}`, company.token, { lastName: "Updated" })
    await ok(server, "POST", `/v1/contacts/${contact.id}/tags`, company.token, { tag_ids: [other] })
    const { funnel, contact: dealContact, won } = await dealSetup(server, company.token)
    const deal = await ok(server, "POST", "/v1/deals", company.token, { title: "D", contact_id: dealContact.id }, 201)
    await ok(server, "POST", `/v1/deals/${deal.id}`, company.token, { funnel_stage_id: won.id })

    const counts = async () => Object.fromEntries(await Promise.all(Object.entries(flows).map(async ([k, a]) => [k, (await runsOf(server, company.token, a.id)).length])))
    await waitFor("every trigger", async () => {
      const c = await counts()
      last.value = c
      return Object.entries(c).every(([k, n]) => k === "tagAdded" || (n as number) >= 1) ? c : undefined
    })
    await sleep(300)
    const c = await counts()
    // Four contacts were created (two inbound senders, one by the API, one for deals); the contact was updated by
    // PATCH and by its tags, with lastName still matching; tag.added waits for the `mark` tag.
    assert.deepStrictEqual(c, {
      message: 1, conversation: 1, contactCreated: 4, contactUpdated: 2, dealCreated: 1, stage: 1, tagAdded: 0
    }, JSON.stringify(c))
    await ok(server, "POST", `/v1/contacts/${contact.id}/tags`, company.token, { tag_ids: [other, mark] })
    await finishedRuns(server, company.token, flows.tagAdded.id, 1)
    const notes = await payloadsOf(server, company.id, "automation.notification")
    assert.isTrue(notes.every((n: any) => n.user_id === company.admin.id))
  })

  it("waits until a time of day in the contact's timezone, else the company's, never the creator's", async () => {
    const company = await createCompany(server)
    await query(server, "UPDATE companies SET timezone = 'Europe/Berlin' WHERE id = $1", [company.id])
    await query(server, "UPDATE users SET timezone = 'Asia/Tokyo' WHERE id = $1", [company.admin.id])
    const automation = await activeAutomation(server, company.token, chain([actionNode("w", "wait", { until: "09:00" })]), [
      trigger("contact.updated", { conditions: [{ type: "contact_field_equals", field: "lastName", value: "Due" }] })
    ])
    const zoned = await createContact(server, company.token, { firstName: "Zed" })
    const plain = await createContact(server, company.token, { firstName: "Pat" })
    await query(server, "UPDATE contacts SET timezone = 'America/New_York' WHERE id = $1", [zoned.id])
    await ok(server, "PATCH", `/v1/contacts/${zoned.id}`, company.token, { lastName: "Due" })
    await ok(server, "PATCH", `/v1/contacts/${plain.id}`, company.token, { lastName: "Due" })
    const waiting = await waitFor("both runs to wait", async () => {
      const runs = await runsOf(server, company.token, automation.id)
      return runs.length === 2 && runs.every((r) => r.status === "waiting") ? runs : undefined
    })
    const localTime = (iso: string, timeZone: string) =>
      new Intl.DateTimeFormat("en-GB", { timeZone, hour: "2-digit", minute: "2-digit", hourCycle: "h23" }).format(new Date(iso))
    const resumeAt = new Map<number, string>()
    for (const run of waiting) {
      const detail = await ok(server, "GET", `/v1/automations/${automation.id}/runs/${run.id}`, company.token)
      const [row] = await query<{ contact_id: number }>(server, "SELECT contact_id FROM automation_runs WHERE id = $1", [run.id])
      resumeAt.set(Number(row.contact_id), detail.steps[0].output.resume_at)
    }
    assert.strictEqual(localTime(resumeAt.get(zoned.id)!, "America/New_York"), "09:00")
    assert.strictEqual(localTime(resumeAt.get(plain.id)!, "Europe/Berlin"), "09:00")
  })

  it("evaluates each condition type, joined by and / or", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    const vip = await createTag(company.token, "vip")
    const { funnel, contact } = await dealSetup(server, company.token)
    const stage = funnel.stages[0].id
    const conditions: Record<string, any> = {
      contains: [{ type: "text_contains", value: "ORDER" }],
      equals: [{ type: "text_equals", value: "  yes " }],
      matches: [{ type: "text_matches", value: "^#\\d{3}$" }],
      type: [{ type: "message_type", value: "text" }],
      first: [{ type: "is_first_message", value: true }],
      tag: [{ type: "has_tag", value: vip }],
      field: [{ type: "contact_field_equals", field: "displayName", value: "Dana" }],
      stage: [{ type: "deal_stage_is", value: stage }],
      or: [{ type: "text_equals", value: "a" }, { type: "text_equals", value: "b" }],
      and: [{ type: "text_contains", value: "order" }, { type: "text_contains", value: "now" }]
    }
    const flows: Record<string, any> = {}
    for (const [name, list] of Object.entries(conditions)) {
      flows[name] = await activeAutomation(server, company.token, chain([actionNode("n", "notify-user", { user_id: company.admin.id, message: name })]), [
        trigger("message.created", { conditions: list, conditionsJoiner: name === "or" ? "or" : "and" })
      ], name)
    }
    // Dana (from dealSetup) has an open deal on the first stage and the vip tag, and writes on an account linked to her.
    await ok(server, "POST", `/v1/contacts/${contact.id}/tags`, company.token, { tag_ids: [vip] })
    await ok(server, "PATCH", `/v1/contacts/${contact.id}`, company.token, { displayName: "Dana", contactAccounts: [{ channel_type: "msgr_b", external_id: "dana-1" }] })
    await ok(server, "POST", "/v1/deals", company.token, { title: "D", contact_id: contact.id }, 201)
    const texts = ["an order now", "yes", "#123", "b"]
    for (const text of texts) await inbound(server, company.token, channelId, { from: { external_id: "dana-1", name: "Dana" }, text })
    const expected: Record<string, number> = { contains: 1, equals: 1, matches: 1, type: 4, first: 1, tag: 4, field: 4, stage: 4, or: 1, and: 1 }
    await waitFor("the matching runs", async () => {
      const n = (await runsOf(server, company.token, flows.stage.id)).length
      return n >= 4 ? n : undefined
    })
    await sleep(500)
    const got = Object.fromEntries(await Promise.all(Object.entries(flows).map(async ([k, a]) => [k, (await runsOf(server, company.token, a.id)).length])))
    assert.deepStrictEqual(got, expected)
  })

  it("runs each contact, deal, notification and HTTP action against the sandbox", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    const { funnel } = await dealSetup(server, company.token)
    const [open, won] = funnel.stages
    const old = await createTag(company.token, "old")
    const voice = await upload(server, company.token, "/v1/automations/media/voice", { bytes: tone("wav", 1), name: "v.wav", type: "audio/wav" })
    assert.strictEqual(voice.status, 201)
    const automation = await activeAutomation(server, company.token, {
      nodes: [
        triggerNode,
        actionNode("field", "update-contact-field", { field: "company", value: "Acme" }),
        actionNode("untag", "remove-tag", { tag_id: old }),
        actionNode("deal", "create-deal", { title: "From automation", funnel_id: funnel.id, funnel_stage_id: open.id }),
        actionNode("move", "move-deal-stage", { funnel_stage_id: won.id }),
        actionNode("http", "http-request", { url: `${receiverUrl}/hook?x=1`, method: "POST", body: "{\"a\":1}" }),
        actionNode("check", "condition", { conditions: [{ type: "text_equals", field: "steps.http.body.vip", value: "true" }] }),
        actionNode("notify", "notify-user", { user_id: company.admin.id, message: "New lead" }),
        actionNode("assign", "assign-conversation", { user_id: company.admin.id }),
        actionNode("voice", "send-message", { voice_mode: "upload", media_id: voice.body.media_id }),
        actionNode("optout", "opt-out-contact", {})
      ],
      edges: [
        edge("t", "field"), edge("field", "untag"), edge("untag", "deal"), edge("deal", "move"), edge("move", "http"), edge("http", "check"),
        edge("check", "notify", "true"), edge("notify", "assign"), edge("assign", "voice"), edge("voice", "optout")
      ]
    }, [trigger("message.created")])
    const received = await inbound(server, company.token, channelId, { from: { external_id: "z-1", name: "Zed" }, text: "hi" })
    const contactId = await contactOfConversation(received.conversation_id)
    await query(server, "INSERT INTO contact_tags (company_id, contact_id, tag_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", [company.id, contactId, old])
    const [run] = await finishedRuns(server, company.token, automation.id)
    assert.strictEqual(run.status, "succeeded", JSON.stringify(run))
    assert.deepStrictEqual(run.steps.map((s: any) => s.node_id), ["field", "untag", "deal", "move", "http", "check", "notify", "assign", "voice", "optout"])
    const http = run.steps.find((s: any) => s.node_id === "http")
    assert.deepStrictEqual([http.output.status, http.output.body], [200, { vip: true, echo: "/hook?x=1" }])
    assert.deepStrictEqual(hits.filter((h) => h.path === "/hook?x=1").map((h) => h.body), ["{\"a\":1}"])

    const contact = (await query<any>(server, "SELECT company_name, opted_out_at FROM contacts WHERE id = $1", [contactId]))[0]
    assert.strictEqual(contact.company_name, "Acme")
    assert.isNotNull(contact.opted_out_at)
    assert.deepStrictEqual(await tagsOf(contactId), [])
    const untagged = (await payloadsOf(server, company.id, "contact.updated")).filter((p: any) => p.changes?.includes("tags"))
    assert.deepStrictEqual(untagged, [{ contact: { id: contactId, tags: [] }, contact_id: contactId, changes: ["tags"] }])
    assert.deepStrictEqual(await payloadsOf(server, company.id, "tag.added"), [])
    const deals = await query<any>(server, "SELECT title, funnel_stage_id, status FROM deals WHERE contact_id = $1", [contactId])
    assert.deepStrictEqual(deals.map((d) => [d.title, Number(d.funnel_stage_id)]), [["From automation", won.id]])
    assert.notStrictEqual(open.id, won.id)
    const notes = await payloadsOf(server, company.id, "automation.notification")
    assert.deepStrictEqual(notes.map((n: any) => [n.user_id, n.message]), [[company.admin.id, "New lead"]])
    assert.deepStrictEqual((await outboundTexts(server, received.conversation_id)).map((m) => m.message_type), ["voice"])
    const [conversation] = await query<any>(server, "SELECT assigned_user_id FROM conversations WHERE id = $1", [received.conversation_id])
    assert.strictEqual(Number(conversation.assigned_user_id), company.admin.id)
    const assigned = await payloadsOf(server, company.id, "conversation.assigned")
    assert.deepStrictEqual(assigned.map((p: any) => [p.conversation_id, p.user_id]), [[received.conversation_id, company.admin.id]])
  })

  it("retries a transient step three times, then fails the run with that step's error; health turns degraded then failing", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    const automation = await activeAutomation(server, company.token, chain([
      actionNode("http", "http-request", { url: `${receiverUrl}/fail`, method: "GET", timeout_seconds: 2 })
    ]), [trigger("message.created")])
    await inbound(server, company.token, channelId, { from: { external_id: "f-1", name: "F" }, text: "x" })
    const [run] = await finishedRuns(server, company.token, automation.id)
    assert.strictEqual(run.status, "failed")
    assert.deepStrictEqual(run.steps.map((s: any) => [s.node_id, s.status, s.attempt, s.error]), [["http", "failed", 3, "The server answered HTTP 503."]])
    assert.match(run.error, /Step http \(http-request\) failed: The server answered HTTP 503/)
    assert.strictEqual(hits.filter((h) => h.path === "/fail").length, 3)
    assert.strictEqual((await ok(server, "GET", `/v1/automations/${automation.id}`, company.token)).healthStatus, "degraded")
    for (let i = 2; i <= 5; i++) await inbound(server, company.token, channelId, { from: { external_id: `f-${i}`, name: "F" }, text: "x" })
    await finishedRuns(server, company.token, automation.id, 5, 30_000)
    assert.strictEqual((await ok(server, "GET", `/v1/automations/${automation.id}`, company.token)).healthStatus, "failing")

    // A refusal by the send rules is not transient: one attempt.
    const blocked = await activeAutomation(server, company.token, chain([actionNode("s", "send-message", { text: "hi" })]), [trigger("message.created")], "blocked")
    const received = await inbound(server, company.token, channelId, { from: { external_id: "blk", name: "B" }, text: "x" })
    const contactId = await contactOfConversation(received.conversation_id)
    await finishedRuns(server, company.token, blocked.id, 1)
    await query(server, "UPDATE contacts SET blocked_at = now() WHERE id = $1", [contactId])
    await inbound(server, company.token, channelId, { from: { external_id: "blk", name: "B" }, text: "again" })
    const runs = await finishedRuns(server, company.token, blocked.id, 2)
    assert.deepStrictEqual(runs.map((r: any) => r.status).sort(), ["failed", "succeeded"])
    const failed = runs.find((r: any) => r.status === "failed")
    assert.deepStrictEqual([failed.steps[0].attempt, failed.steps[0].error.startsWith("contact_blocked")], [1, true])
  })

  it("keeps a run on the version it started on while a new one is published; pausing stops new runs", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    const first = await createTag(company.token, "first")
    const second = await createTag(company.token, "second")
    const graph = (tag: number) => chain([actionNode("w", "wait", { duration: 2, unit: "seconds" }), actionNode("tag", "add-tag", { tag_id: tag })])
    const automation = await activeAutomation(server, company.token, graph(first), [trigger("message.created")])
    const received = await inbound(server, company.token, channelId, { from: { external_id: "v-1", name: "V" }, text: "x" })
    const waiting = await waitFor("a waiting run", async () => {
      const runs = await runsOf(server, company.token, automation.id)
      return runs[0]?.status === "waiting" ? runs[0] : undefined
    })
    const v2 = await ok(server, "PATCH", `/v1/automations/${automation.id}/builder`, company.token, { ...graph(second), triggers: [trigger("message.created")] })
    assert.notStrictEqual(v2.activeVersionId, automation.activeVersionId)
    const [run] = await finishedRuns(server, company.token, automation.id)
    assert.deepStrictEqual([run.id, run.status, run.version_id], [waiting.id, "succeeded", automation.activeVersionId])
    const contactId = await contactOfConversation(received.conversation_id)
    assert.deepStrictEqual(await tagsOf(contactId), [first])
    assert.match(run.steps[0].output.resume_at, /^\d{4}-/)

    await inbound(server, company.token, channelId, { from: { external_id: "v-2", name: "W" }, text: "x" })
    const runs = await finishedRuns(server, company.token, automation.id, 2)
    assert.strictEqual(runs.find((r: any) => r.id !== run.id).version_id, v2.activeVersionId)

    await ok(server, "PATCH", `/v1/automations/${automation.id}`, company.token, { status: "paused" })
    await inbound(server, company.token, channelId, { from: { external_id: "v-3", name: "X" }, text: "x" })
    await sleep(800)
    assert.strictEqual((await runsOf(server, company.token, automation.id)).length, 2)
  })

  it("starts on the first event after activation in a company whose earlier events found nothing to start", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    // The company's trigger index is read here, empty: its events are passed over without a look at the database.
    await inbound(server, company.token, channelId, { from: { external_id: "q-1", name: "Q" }, text: "before" })
    await sleep(300)
    const automation = await activeAutomation(server, company.token, chain([actionNode("n", "notify-user", { user_id: company.admin.id, message: "x" })]), [trigger("message.created")])
    await inbound(server, company.token, channelId, { from: { external_id: "q-2", name: "R" }, text: "after" })
    const [run] = await finishedRuns(server, company.token, automation.id)
    assert.strictEqual(run.status, "succeeded")
    await sleep(300)
    assert.strictEqual((await runsOf(server, company.token, automation.id)).length, 1)
  })

  it("writes the tag steps and the ends of runs that meet in one batch, each announced once and in order", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    const [red, blue] = [await createTag(company.token, "red"), await createTag(company.token, "Blue")]
    const automations = []
    for (let i = 0; i < 12; i++) {
      automations.push(await activeAutomation(server, company.token, chain([
        actionNode("tag", "add-tag", { tag_id: i % 2 === 0 ? red : blue }),
        actionNode("n", "notify-user", { user_id: company.admin.id, message: `A${i}` })
      ]), [trigger("message.created")], `A${i}`))
    }
    const received = await inbound(server, company.token, channelId, { from: { external_id: "b-1", name: "B" }, text: "hi" })
    const runs = (await Promise.all(automations.map((a) => finishedRuns(server, company.token, a.id)))).flat()
    assert.deepStrictEqual(runs.map((r: any) => [r.status, r.steps.map((s: any) => `${s.node_id}:${s.status}`).join(",")]), runs.map(() => ["succeeded", "tag:succeeded,n:succeeded"]))
    const contactId = await contactOfConversation(received.conversation_id)
    assert.deepStrictEqual(await tagsOf(contactId), [red, blue].sort((a, b) => a - b))
    // Six runs add each tag: each tag is announced added once, and the contact's last update lists both, in name order.
    const added = await payloadsOf(server, company.id, "tag.added")
    assert.deepStrictEqual(added.map((p: any) => p.tag_id).sort((a: number, b: number) => a - b), [red, blue].sort((a, b) => a - b))
    const updates = (await payloadsOf(server, company.id, "contact.updated")).filter((p: any) => p.changes?.includes("tags"))
    assert.isAtMost(updates.length, 2)
    assert.deepStrictEqual(updates.at(-1).contact.tags, [{ id: blue, name: "Blue" }, { id: red, name: "red" }])
    const finished = await payloadsOf(server, company.id, "automation.run.finished")
    assert.deepStrictEqual(finished.map((p: any) => p.run_id).sort(), runs.map((r: any) => r.id).sort())
    // Runs that ended while another's end was being written share its transaction.
    const [{ n }] = await query<{ n: number }>(server, "SELECT count(DISTINCT xmin::text)::int AS n FROM automation_runs WHERE company_id = $1", [company.id])
    assert.isBelow(n, runs.length, "the ends of the runs were written one by one")
  })

  it("counts the runs admitted with it in one statement in the loop guard", async () => {
    const company = await createCompany(server)
    const contact = await createContact(server, company.token, { firstName: "Guarded" })
    const created = await ok(server, "POST", "/v1/automations", company.token, { name: "Guard", description: null, status: "draft" }, 201)
    const built = await ok(server, "PATCH", `/v1/automations/${created.id}/builder`, company.token, {
      ...chain([actionNode("n", "notify-user", { user_id: company.admin.id, message: "x" })]),
      triggers: [trigger("contact.updated")]
    })
    // Twelve starts of one automation for one contact at once, past the entity that would have taken them
    // one by one: the first goes alone, the eleven that queued meanwhile are admitted in one statement.
    const started = await server.runInApp(Effect.gen(function*() {
      const runs = yield* Runs
      return yield* Effect.forEach(Array.from({ length: 12 }, (_, i) => i), (i) =>
        runs.start({
          companyId: company.id,
          automationId: created.id,
          versionId: built.latestVersionId,
          event: "contact.updated",
          eventId: 900_000 + i,
          contactId: contact.id,
          context: { contact_id: contact.id, payload: { contact_id: contact.id } }
        }), { concurrency: "unbounded" })
    }).pipe(Effect.provide(Runs.layer.pipe(Layer.provide(AutomationsRepo.layer)))))
    assert.deepStrictEqual([started.filter((s) => s !== null).length, started.filter((s) => s === null).length], [10, 2])
    const rows = await query<{ status: string; n: number }>(server,
      "SELECT status, count(*)::int AS n FROM automation_runs WHERE company_id = $1 AND automation_id = $2 GROUP BY status ORDER BY status", [company.id, created.id])
    assert.deepStrictEqual(rows.map((r) => [r.status, r.n]), [["cancelled", 2], ["running", 10]])
    const [{ n }] = await query<{ n: number }>(server, "SELECT count(DISTINCT xmin::text)::int AS n FROM automation_runs WHERE company_id = $1", [company.id])
    assert.isBelow(n, 12, "the runs were admitted one by one")
  })

  it("starts at most 10 runs per contact and hour; the rest are logged as cancelled", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    const automation = await activeAutomation(server, company.token, chain([actionNode("n", "notify-user", { user_id: company.admin.id, message: "x" })]), [trigger("message.created")])
    for (let i = 0; i < 12; i++) await inbound(server, company.token, channelId, { from: { external_id: "loop", name: "L" }, text: `m${i}` })
    const runs = await finishedRuns(server, company.token, automation.id, 12, 30_000)
    const statuses = runs.map((r: any) => r.status)
    assert.deepStrictEqual([statuses.filter((s) => s === "succeeded").length, statuses.filter((s) => s === "cancelled").length], [10, 2])
    assert.match(runs.find((r: any) => r.status === "cancelled").error, /already started 10 runs/)
    assert.strictEqual((await ok(server, "GET", `/v1/automations/${automation.id}`, company.token)).executionsCount, 10)
    const other = await inbound(server, company.token, channelId, { from: { external_id: "someone-else", name: "S" }, text: "m" })
    assert.isNumber(other.message_id)
    await finishedRuns(server, company.token, automation.id, 13)
  })

  it("never starts on another company's events, and another company cannot read its runs", async () => {
    const owner = await createCompany(server)
    const other = await createCompany(server)
    const ownChannel = await createChannel(server, owner.token, "msgr_b")
    const otherChannel = await createChannel(server, other.token, "msgr_b")
    const automation = await activeAutomation(server, owner.token, chain([actionNode("n", "notify-user", { user_id: owner.admin.id, message: "x" })]), [trigger("message.created")])
    await inbound(server, other.token, otherChannel, { from: { external_id: "o-1", name: "O" }, text: "hello" })
    await inbound(server, owner.token, ownChannel, { from: { external_id: "w-1", name: "W" }, text: "hello" })
    const [run] = await finishedRuns(server, owner.token, automation.id)
    await sleep(300)
    assert.strictEqual((await runsOf(server, owner.token, automation.id)).length, 1)
    const res = await request(server, "GET", `/v1/automations/${automation.id}/runs/${run.id}`, { token: other.token })
    assert.strictEqual(res.status, 404)
  })
})

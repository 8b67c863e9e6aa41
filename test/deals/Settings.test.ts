import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Option, Scope } from "effect"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { CompanyId } from "../../src/auth/Domain.ts"
import { remindersLayer } from "../../src/deals/Reminders.ts"
import { autoCreateForConversation } from "../../src/deals/Settings.ts"
import { conversationOn, createChannel, inbound } from "../messages/support.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { activitiesOf, createDeal, createFunnel, dealSetup, eventsOf, ok } from "./support.ts"
import { query } from "../support/Sql.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const autoCreate = (companyId: number, conversationId: number, channelId?: number) =>
  server.runInApp(autoCreateForConversation(CompanyId.make(companyId), conversationId, channelId === undefined ? {} : { channelId }))

describe("deal settings and auto-creation", () => {
  it("creates one deal from the first inbound message of a new conversation, through the real inbound path", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    await createFunnel(server, company.token)
    await ok(server, "POST", "/v1/company/deal-settings", company.token, { auto_create_deal_enabled: true })
    const channelId = await createChannel(server, company.token, "msgr_b")
    const first = await inbound(server, company.token, channelId, { from: { external_id: "auto-1", name: "Ann Lee" } })
    await inbound(server, company.token, channelId, { from: { external_id: "auto-1", name: "Ann Lee" }, text: "again" })
    const deals = await query<{ id: number; conversation_id: number; source: string }>(
      server,
      "SELECT id, conversation_id, source FROM deals WHERE company_id = $1",
      [company.id]
    )
    assert.deepStrictEqual(deals.map((d) => [d.conversation_id, d.source]), [[first.conversation_id, "auto"]])
    const foreign = await request(server, "GET", `/v1/deals/${deals[0].id}`, { token: other.token })
    assert.strictEqual(foreign.status, 404)
  })

  it("answers resolved settings, saves them, and refuses auto-creation without a funnel", async () => {
    const company = await createCompany(server)
    assert.deepStrictEqual(await ok(server, "GET", "/v1/company/deal-settings", company.token), {
      auto_create_deal_enabled: false,
      default_funnel_id: null,
      default_deal_title_template: "{{contact_name}} ({{channel_name}})",
      default_currency: "KZT",
      has_funnels: false
    })
    const refused = await request(server, "POST", "/v1/company/deal-settings", { token: company.token, body: { auto_create_deal_enabled: true } })
    assert.deepStrictEqual([refused.status, Object.keys(refused.body.errors)], [422, ["auto_create_deal_enabled"]])
    assert.strictEqual((await ok(server, "GET", "/v1/company/deal-settings", company.token)).auto_create_deal_enabled, false)

    const funnel = await createFunnel(server, company.token)
    const saved = await ok(server, "POST", "/v1/company/deal-settings", company.token, {
      auto_create_deal_enabled: true,
      default_funnel_id: funnel.id,
      default_deal_title_template: "Lead: {{contact_name}} via {{channel_name}}",
      default_currency: "EUR"
    })
    assert.deepStrictEqual(saved, {
      auto_create_deal_enabled: true,
      default_funnel_id: funnel.id,
      default_deal_title_template: "Lead: {{contact_name}} via {{channel_name}}",
      default_currency: "EUR",
      has_funnels: true
    })
    // A partial POST keeps the rest; null currency falls back to KZT.
    const partial = await ok(server, "POST", "/v1/company/deal-settings", company.token, { default_currency: null })
    assert.deepStrictEqual([partial.auto_create_deal_enabled, partial.default_funnel_id, partial.default_currency], [true, funnel.id, "KZT"])

    const other = await createCompany(server)
    const foreignFunnel = await createFunnel(server, other.token)
    const foreign = await request(server, "POST", "/v1/company/deal-settings", { token: company.token, body: { default_funnel_id: foreignFunnel.id } })
    assert.deepStrictEqual(foreign.body.errors, { default_funnel_id: ["The selected default_funnel_id is invalid."] })
    assert.strictEqual((await request(server, "POST", "/v1/company/deal-settings", { token: company.token, body: { default_currency: "euro" } })).status, 422)
    assert.strictEqual((await ok(server, "GET", "/v1/company/deal-settings", other.token)).auto_create_deal_enabled, false)

    const agent = await addUser(server, company.id, { role: "agent" })
    const agentToken = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
    assert.strictEqual((await request(server, "GET", "/v1/company/deal-settings", { token: agentToken })).status, 200)
    assert.strictEqual((await request(server, "POST", "/v1/company/deal-settings", { token: agentToken, body: {} })).status, 403)
  })

  it("creates one deal for a conversation's first inbound message, even under 20 concurrent calls", async () => {
    const company = await createCompany(server)
    const { conversationId, channelId } = await conversationOn(server, company.token)
    // Disabled: nothing happens.
    assert.deepStrictEqual(await autoCreate(company.id, conversationId, channelId), Option.none())

    await createFunnel(server, company.token, { name: "First" })
    const target = await createFunnel(server, company.token, {
      name: "Inbound",
      stages: [{ name: "Won early", type: "success" }, { name: "Incoming", type: "open", order: 5 }, { name: "Later", type: "open", order: 9 }]
    })
    await ok(server, "POST", "/v1/company/deal-settings", company.token, {
      auto_create_deal_enabled: true,
      default_funnel_id: target.id,
      default_deal_title_template: "{{contact_name}} via {{channel_name}}"
    })
    const results = await Promise.all(Array.from({ length: 20 }, () => autoCreate(company.id, conversationId, channelId)))
    const created = results.filter(Option.isSome)
    assert.strictEqual(created.length, 1)
    const deals = await query(server, "SELECT id FROM deals WHERE company_id = $1 AND conversation_id = $2", [company.id, conversationId])
    assert.deepStrictEqual(deals.map((d) => d.id), [created[0].value])

    const deal = await ok(server, "GET", `/v1/deals/${created[0].value}`, company.token)
    const [channel] = await query(server, "SELECT name FROM channels WHERE id = $1", [channelId])
    assert.deepStrictEqual(
      [deal.title, deal.funnel_id, deal.funnel_stage_id, deal.status, deal.source, deal.conversation_id, deal.currency],
      [`Ann Lee via ${channel.name}`, target.id, target.stages[1].id, "open", "auto", conversationId, "KZT"]
    )
    assert.strictEqual(deal.responsible_user_id, company.admin.id)
    const timeline = await activitiesOf(server, company.token, deal.id)
    assert.deepStrictEqual(timeline.map((a) => [a.type, a.actor, a.actor_user_id]), [["system", null, null]])
    assert.strictEqual((await eventsOf(server, company.id, "deal.created")).length, 1)

    // Later calls for the same conversation, and a manual deal for it, find it taken.
    assert.deepStrictEqual(await autoCreate(company.id, conversationId), Option.none())
    const manual = await request(server, "POST", "/v1/deals", { token: company.token, body: { contact_id: deal.contact_id, title: "x", conversation_id: conversationId } })
    assert.strictEqual(manual.status, 422)

    // Without a default funnel id it takes the default funnel; another company's conversation gets nothing.
    await ok(server, "POST", "/v1/company/deal-settings", company.token, { default_funnel_id: null })
    const second = await inbound(server, company.token, await createChannel(server, company.token, "msgr_b"), { from: { external_id: "someone-else", name: "Bo" } })
    // The inbound path itself made it (inside the inbound transaction).
    const [made] = await query(server, "SELECT id FROM deals WHERE company_id = $1 AND conversation_id = $2", [company.id, second.conversation_id])
    const other = await ok(server, "GET", `/v1/deals/${made.id}`, company.token)
    const [first] = await ok(server, "GET", "/v1/funnels", company.token)
    assert.deepStrictEqual([other.funnel_id, other.funnel_stage_id], [first.id, first.stages[0].id])
    const stranger = await createCompany(server)
    assert.deepStrictEqual(await autoCreate(stranger.id, second.conversation_id), Option.none())
  })

  it("a reminder due while no runner was up fires once at start, never again after a restart, once across two runners", async () => {
    const company = await createCompany(server)
    const { contact } = await dealSetup(server, company.token)
    const deal = await createDeal(server, company.token, { contact_id: contact.id })
    const agent = await addUser(server, company.id, { role: "agent" })
    const past = new Date(Date.now() - 60_000).toISOString()
    const task = await ok(server, "POST", "/v1/deal-tasks", company.token, { deal_id: deal.id, title: "missed", remind_at: past, assigned_user_id: agent.id }, 201)
    const done = await ok(server, "POST", "/v1/deal-tasks", company.token, { deal_id: deal.id, title: "done", remind_at: past, assigned_user_id: agent.id }, 201)
    await ok(server, "PATCH", `/v1/deal-tasks/${done.id}`, company.token, { status: "done" })

    const reminders = async () => (await eventsOf(server, company.id, "deal_task.reminder")).map((e) => [e.payload.user_id, e.payload.task.id])
    const run = async (ms: number, runners = 1) => {
      const scopes = await Promise.all(Array.from({ length: runners }, () =>
        server.runInApp(Effect.gen(function*() {
          const scope = yield* Scope.make()
          yield* Layer.buildWithScope(remindersLayer({ interval: "100 millis" }), scope)
          return scope
        }))
      ))
      await new Promise((resolve) => setTimeout(resolve, ms))
      await Promise.all(scopes.map((scope) => server.runInApp(Scope.close(scope, Exit.void))))
    }

    assert.deepStrictEqual(await reminders(), [])
    await run(500)
    assert.deepStrictEqual(await reminders(), [[agent.id, task.id]])
    // A restart: the reminder is not sent again.
    await run(400)
    assert.deepStrictEqual(await reminders(), [[agent.id, task.id]])

    // Two runners sweeping at once send a reminder once; one set in the near future fires when due.
    const soon = await ok(server, "POST", "/v1/deal-tasks", company.token, {
      deal_id: deal.id, title: "soon", remind_at: new Date(Date.now() + 700).toISOString(), assigned_user_id: agent.id
    }, 201)
    await run(300, 2)
    assert.deepStrictEqual((await reminders()).length, 1)
    await run(1500, 2)
    assert.deepStrictEqual(await reminders(), [[agent.id, task.id], [agent.id, soon.id]])

    // A new remind_at is a new timer.
    await ok(server, "PATCH", `/v1/deal-tasks/${task.id}`, company.token, { remind_at: new Date(Date.now() - 1000).toISOString() })
    await run(400)
    assert.deepStrictEqual((await reminders()).map(([, id]) => id), [task.id, soon.id, task.id])
  })
})

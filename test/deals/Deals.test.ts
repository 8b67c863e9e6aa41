import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { createContact } from "../contacts/support.ts"
import { conversationOn } from "../messages/support.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { activitiesOf, createDeal, createFunnel, dealSetup, eventsOf, ok } from "./support.ts"
import { query } from "../support/Sql.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const dealKeys = [
  "amount", "begin_date", "channel", "closed_amount", "closed_at", "closed_currency", "comments", "company_id", "contact_id",
  "conversation_id", "created_at", "currency", "custom_fields", "deal_id", "deleted_at", "expected_close_date", "funnel_id",
  "funnel_stage_id", "id", "lost_reason", "lost_reason_id", "probability", "responsible_user_id", "source", "stage_changed_at",
  "status", "title", "type_id", "updated_at", "utm_campaign", "utm_medium", "utm_source"
].filter((k) => k !== "deal_id").sort()

describe("deals", () => {
  it("creates a deal with defaults, reads it, and lists with filters and paging", async () => {
    const company = await createCompany(server)
    const { funnel, contact, open, won } = await dealSetup(server, company.token)
    const deal = await createDeal(server, company.token, { contact_id: contact.id, title: " Big one ", amount: "1500.5" })
    assert.deepStrictEqual(Object.keys(deal).sort(), dealKeys)
    assert.deepStrictEqual(
      [deal.title, deal.amount, deal.currency, deal.status, deal.funnel_id, deal.funnel_stage_id, deal.source, deal.custom_fields],
      ["Big one", "1500.50", "KZT", "open", funnel.id, open.id, "manual", {}]
    )
    assert.strictEqual(deal.responsible_user_id, (await ok(server, "GET", "/v1/me", company.token)).id)
    assert.deepStrictEqual([deal.closed_at, deal.closed_amount, deal.deleted_at], [null, null, null])
    assert.deepStrictEqual(await ok(server, "GET", `/v1/deals/${deal.id}`, company.token), deal)

    // The company's default currency applies when the deal names none.
    await ok(server, "POST", "/v1/company/deal-settings", company.token, { default_currency: "USD" })
    const usd = await createDeal(server, company.token, {
      contact_id: contact.id,
      funnel_id: funnel.id,
      funnel_stage_id: open.id,
      custom_fields: { vip: true, score: 7 },
      begin_date: "2026-01-02",
      probability: 40
    })
    assert.deepStrictEqual([usd.currency, usd.custom_fields, usd.begin_date, usd.probability], ["USD", { vip: true, score: 7 }, "2026-01-02", 40])
    const eur = await createDeal(server, company.token, { contact_id: contact.id, currency: "EUR", funnel_stage_id: won.id })
    assert.deepStrictEqual([eur.currency, eur.status, eur.closed_amount, eur.closed_currency], ["EUR", "won", "0.00", "EUR"])

    const bad = await request(server, "POST", "/v1/deals", {
      token: company.token,
      body: { contact_id: contact.id, title: "x", amount: 1.5, currency: "usd", probability: 120, begin_date: "2026-02-30" }
    })
    assert.strictEqual(bad.status, 422)
    assert.deepStrictEqual(Object.keys(bad.body.errors).sort(), ["amount", "begin_date", "currency", "probability"])
    const noTitle = await request(server, "POST", "/v1/deals", { token: company.token, body: { contact_id: contact.id } })
    assert.deepStrictEqual(Object.keys(noTitle.body.errors ?? {}), ["title"])
    const foreignContact = await request(server, "POST", "/v1/deals", { token: company.token, body: { contact_id: 999999999, title: "x" } })
    assert.deepStrictEqual(foreignContact.body.errors, { contact_id: ["The selected contact_id is invalid."] })

    const other = await createContact(server, company.token, { firstName: "Other" })
    const agent = await addUser(server, company.id, { role: "agent" })
    await createDeal(server, company.token, { contact_id: other.id, responsible_user_id: agent.id })

    const all = await ok(server, "GET", "/v1/deals", company.token)
    assert.deepStrictEqual(all.pagination, { page: 1, perPage: 20, total: 4, lastPage: 1 })
    assert.deepStrictEqual(all.items.slice(1).map((d: any) => d.id), [eur.id, usd.id, deal.id])
    const byContact = await ok(server, "GET", `/v1/deals?contact_id=${contact.id}`, company.token)
    assert.strictEqual(byContact.pagination.total, 3)
    assert.deepStrictEqual((await ok(server, "GET", "/v1/deals?status=won", company.token)).items.map((d: any) => d.id), [eur.id])
    assert.strictEqual((await ok(server, "GET", `/v1/deals?responsible_user_id=${agent.id}`, company.token)).items[0].contact_id, other.id)
    assert.strictEqual((await ok(server, "GET", `/v1/deals?funnel_id=${funnel.id}&funnel_stage_id=${open.id}`, company.token)).pagination.total, 3)
    const page2 = await ok(server, "GET", "/v1/deals?perPage=3&page=2", company.token)
    assert.deepStrictEqual([page2.items.map((d: any) => d.id), page2.pagination], [[deal.id], { page: 2, perPage: 3, total: 4, lastPage: 2 }])
    assert.strictEqual((await request(server, "GET", "/v1/deals?status=closed", { token: company.token })).status, 422)

    const forContact = await ok(server, "GET", `/v1/contacts/${contact.id}/deals?perPage=2`, company.token)
    assert.deepStrictEqual([forContact.items.map((d: any) => d.id), forContact.pagination.total], [[eur.id, usd.id], 3])
    assert.strictEqual((await request(server, "GET", "/v1/contacts/999999999/deals", { token: company.token })).status, 404)

    const created = await eventsOf(server, company.id, "deal.created")
    assert.deepStrictEqual(created.map((e) => e.payload.deal.id), [deal.id, usd.id, eur.id, all.items[0].id])
    assert.deepStrictEqual((await eventsOf(server, company.id, "deal.won")).map((e) => e.payload.deal.id), [eur.id])
    assert.deepStrictEqual((await activitiesOf(server, company.token, eur.id)).map((a) => a.type), ["won", "created"])
  })

  it("amounts are decimal strings end to end: 0.10 + 0.20 is exactly 0.30", async () => {
    const company = await createCompany(server)
    const { contact } = await dealSetup(server, company.token)
    const a = await createDeal(server, company.token, { contact_id: contact.id, amount: "0.10" })
    const b = await createDeal(server, company.token, { contact_id: contact.id, amount: "0.2" })
    assert.deepStrictEqual([a.amount, b.amount], ["0.10", "0.20"])
    const [{ total }] = await query(server, "SELECT sum(amount)::text AS total FROM deals WHERE company_id = $1", [company.id])
    assert.strictEqual(total, "0.30")
    const big = await createDeal(server, company.token, { contact_id: contact.id, amount: "123456789012345678.91" })
    assert.strictEqual(big.amount, "123456789012345678.91")
    const changed = await ok(server, "POST", `/v1/deals/${a.id}`, company.token, { amount: "0.30" })
    assert.deepStrictEqual([changed.amount, Object.keys(changed).sort()], ["0.30", ["amount", "id", "updated_at"]])
    const same = await ok(server, "POST", `/v1/deals/${a.id}`, company.token, { amount: "0.3" })
    assert.deepStrictEqual(same, { id: a.id })
    const entry = (await activitiesOf(server, company.token, a.id)).find((x) => x.type === "field_changed")
    assert.deepStrictEqual(entry.metadata, { field: "amount", from: "0.10", to: "0.30" })
    for (const amount of ["1e3", "-1", "0.001", "12,5", ""]) {
      const res = await request(server, "POST", `/v1/deals/${a.id}`, { token: company.token, body: { amount } })
      assert.deepStrictEqual([res.status, Object.keys(res.body.errors)], [422, ["amount"]], amount)
    }
  })

  it("follows the state table: derived status, snapshots, the three 422 messages, reopening", async () => {
    const company = await createCompany(server)
    const { funnel, contact, open, won, lost } = await dealSetup(server, company.token)
    const reason = await ok(server, "POST", "/v1/lost-reasons", company.token, { name: "Too expensive" }, 201)
    const deal = await createDeal(server, company.token, { contact_id: contact.id, amount: "100.00", currency: "USD" })

    // Stage of type success, no status: won, with the amount snapshot.
    const toWon = await ok(server, "POST", `/v1/deals/${deal.id}`, company.token, { funnel_stage_id: won.id, amount: "120.50" })
    assert.deepStrictEqual(
      [toWon.status, toWon.funnel_stage_id, toWon.amount, toWon.closed_amount, toWon.closed_currency, typeof toWon.closed_at],
      ["won", won.id, "120.50", "120.50", "USD", "string"]
    )
    assert.ok(toWon.stage_changed_at)
    assert.strictEqual(toWon.funnel_id, undefined, "unchanged fields are not answered")

    // Reopen: status open clears the close fields (the stage stays).
    const reopened = await ok(server, "POST", `/v1/deals/${deal.id}`, company.token, { status: "open" })
    assert.deepStrictEqual(
      [reopened.status, reopened.closed_at, reopened.closed_amount, reopened.closed_currency, reopened.funnel_stage_id],
      ["open", null, null, null, undefined]
    )

    // Failed stage without a reason: 422, nothing written.
    const noReason = await request(server, "POST", `/v1/deals/${deal.id}`, { token: company.token, body: { funnel_stage_id: lost.id, title: "changed" } })
    assert.deepStrictEqual([noReason.status, noReason.body], [422, {
      message: "A lost reason is required when marking a deal as lost.",
      errors: { lost_reason_id: ["A lost reason is required when marking a deal as lost."] }
    }])
    const unchanged = await ok(server, "GET", `/v1/deals/${deal.id}`, company.token)
    assert.deepStrictEqual([unchanged.title, unchanged.funnel_stage_id, unchanged.status], ["Deal", won.id, "open"])
    const explicitNoReason = await request(server, "POST", `/v1/deals/${deal.id}`, { token: company.token, body: { status: "lost" } })
    assert.strictEqual(explicitNoReason.body.message, "A lost reason is required when marking a deal as lost.")

    const toLost = await ok(server, "POST", `/v1/deals/${deal.id}`, company.token, { funnel_stage_id: lost.id, lost_reason_id: reason.id })
    assert.deepStrictEqual(
      [toLost.status, toLost.lost_reason_id, toLost.lost_reason, toLost.closed_amount, toLost.closed_currency],
      ["lost", reason.id, "Too expensive", "120.50", "USD"]
    )
    // Back to an open stage: derived open, close fields cleared.
    const back = await ok(server, "POST", `/v1/deals/${deal.id}`, company.token, { funnel_stage_id: open.id })
    assert.deepStrictEqual([back.status, back.lost_reason_id, back.lost_reason, back.closed_at], ["open", null, null, null])
    // Explicit status with a free-text reason; explicit won from an open stage.
    const freeText = await ok(server, "POST", `/v1/deals/${deal.id}`, company.token, { status: "lost", lost_reason: "Went silent" })
    assert.deepStrictEqual([freeText.status, freeText.lost_reason, freeText.lost_reason_id], ["lost", "Went silent", undefined])
    const wonAgain = await ok(server, "POST", `/v1/deals/${deal.id}`, company.token, { status: "won" })
    assert.deepStrictEqual([wonAgain.status, wonAgain.lost_reason, wonAgain.funnel_stage_id], ["won", null, undefined])
    // Status wins over the stage type when both are given.
    const both = await ok(server, "POST", `/v1/deals/${deal.id}`, company.token, { status: "open", funnel_stage_id: won.id })
    assert.deepStrictEqual([both.status, both.funnel_stage_id], ["open", won.id])

    // Funnel rules.
    const second = await createFunnel(server, company.token, { name: "Second" })
    const needStage = await request(server, "POST", `/v1/deals/${deal.id}`, { token: company.token, body: { funnel_id: second.id } })
    assert.deepStrictEqual([needStage.status, needStage.body], [422, {
      message: "A funnel_stage_id is required when changing funnel_id.",
      errors: { funnel_stage_id: ["A funnel_stage_id is required when changing funnel_id."] }
    }])
    const outside = await request(server, "POST", `/v1/deals/${deal.id}`, { token: company.token, body: { funnel_id: second.id, funnel_stage_id: open.id } })
    assert.deepStrictEqual([outside.status, outside.body], [422, {
      message: "Selected stage does not belong to the selected funnel.",
      errors: { funnel_stage_id: ["Selected stage does not belong to the selected funnel."] }
    }])
    const outsideSameFunnel = await request(server, "POST", `/v1/deals/${deal.id}`, { token: company.token, body: { funnel_stage_id: second.stages[0].id } })
    assert.strictEqual(outsideSameFunnel.body.message, "Selected stage does not belong to the selected funnel.")
    const onCreate = await request(server, "POST", "/v1/deals", { token: company.token, body: { contact_id: contact.id, title: "x", funnel_id: second.id } })
    assert.strictEqual(onCreate.body.message, "A funnel_stage_id is required when changing funnel_id.")
    const moved = await ok(server, "POST", `/v1/deals/${deal.id}`, company.token, { funnel_id: second.id, funnel_stage_id: second.stages[0].id })
    assert.deepStrictEqual([moved.funnel_id, moved.funnel_stage_id, moved.status], [second.id, second.stages[0].id, undefined])
    assert.strictEqual(funnel.id !== second.id, true)

    const timeline = await activitiesOf(server, company.token, deal.id)
    assert.deepStrictEqual(timeline.map((a) => a.type).reverse(), [
      "created",
      "field_changed", "stage_changed", "won", // amount, to Won
      "field_changed", // reopen (status)
      "stage_changed", "lost",
      "stage_changed", "field_changed", // back to open
      "lost", // free text
      "won",
      "stage_changed", "field_changed", // stage + reopen
      "field_changed", "stage_changed" // funnel move
    ])
    const stageEntry = timeline.reverse().find((a) => a.type === "stage_changed")
    assert.deepStrictEqual([stageEntry.metadata, stageEntry.body], [{ from: open.id, to: won.id }, "New → Won"])
    const me = await ok(server, "GET", "/v1/me", company.token)
    assert.deepStrictEqual(stageEntry.actor, { id: me.id, name: me.name, lastname: me.lastname ?? null })
    const funnelEntry = timeline.find((a) => a.type === "field_changed" && a.metadata.field === "funnel_id")
    assert.deepStrictEqual(funnelEntry.metadata, { field: "funnel_id", from: funnel.id, to: second.id })

    const stageEvents = await eventsOf(server, company.id, "deal.stage_changed")
    assert.deepStrictEqual(stageEvents[0].payload.from, open.id)
    assert.deepStrictEqual(stageEvents[0].payload.to, won.id)
    assert.strictEqual((await eventsOf(server, company.id, "deal.won")).length, 2)
    assert.strictEqual((await eventsOf(server, company.id, "deal.lost")).length, 2)
    const updated = await eventsOf(server, company.id, "deal.updated")
    assert.deepStrictEqual(updated[0].payload.changes.sort(), ["amount", "closed_amount", "closed_at", "closed_currency", "funnel_stage_id", "stage_changed_at", "status", "updated_at"])
  })

  it("tracks field changes and responsible changes in the timeline; notes; activities page; nothing edits an entry", async () => {
    const company = await createCompany(server)
    const { contact } = await dealSetup(server, company.token)
    const type = await ok(server, "POST", "/v1/deal-types", company.token, { name: "Renewal" }, 201)
    const manager = await addUser(server, company.id, { role: "manager" })
    const deal = await createDeal(server, company.token, { contact_id: contact.id, title: "Old" })
    const changed = await ok(server, "POST", `/v1/deals/${deal.id}`, company.token, {
      title: "New",
      currency: "EUR",
      type_id: type.id,
      responsible_user_id: manager.id,
      expected_close_date: "2026-12-31",
      comments: "not tracked"
    })
    assert.deepStrictEqual(
      [changed.title, changed.currency, changed.type_id, changed.responsible_user_id, changed.expected_close_date, changed.comments],
      ["New", "EUR", type.id, manager.id, "2026-12-31", "not tracked"]
    )
    const entries = await activitiesOf(server, company.token, deal.id)
    const fields = entries.filter((a) => a.type === "field_changed").map((a) => a.metadata)
    assert.deepStrictEqual(fields.sort((a, b) => a.field.localeCompare(b.field)), [
      { field: "currency", from: "KZT", to: "EUR" },
      { field: "expected_close_date", from: null, to: "2026-12-31" },
      { field: "title", from: "Old", to: "New" },
      { field: "type_id", from: null, to: type.id }
    ])
    const responsible = entries.find((a) => a.type === "responsible_changed")
    assert.deepStrictEqual(responsible.metadata, { field: "responsible_user_id", from: deal.responsible_user_id, to: manager.id })
    const badRefs = await request(server, "POST", `/v1/deals/${deal.id}`, { token: company.token, body: { responsible_user_id: 999999999, type_id: 999999999 } })
    assert.strictEqual(badRefs.status, 422)

    const note = await request(server, "POST", `/v1/deals/${deal.id}/notes`, { token: company.token, body: { body: "Called, no answer" } })
    assert.strictEqual(note.status, 201, JSON.stringify(note.body))
    assert.strictEqual(note.body.data.message, "Note added.")
    assert.deepStrictEqual(Object.keys(note.body.data.item).sort(), ["actor", "actor_user_id", "body", "created_at", "deal_id", "id", "metadata", "type"])
    assert.deepStrictEqual([note.body.data.item.type, note.body.data.item.body, note.body.data.item.deal_id], ["note", "Called, no answer", deal.id])
    assert.strictEqual((await request(server, "POST", `/v1/deals/${deal.id}/notes`, { token: company.token, body: { body: " " } })).status, 422)

    const page = await ok(server, "GET", `/v1/deals/${deal.id}/activities?perPage=2`, company.token)
    assert.deepStrictEqual([page.items.map((a: any) => a.type), page.pagination.total], [["note", page.items[1].type], 7])

    // The table itself refuses: no statement edits or removes an entry.
    const update = await query(server, "UPDATE deal_activities SET body = 'x' WHERE deal_id = $1", [deal.id]).then(() => "written", () => "refused")
    const remove = await query(server, "DELETE FROM deal_activities WHERE deal_id = $1", [deal.id]).then(() => "written", () => "refused")
    assert.deepStrictEqual([update, remove], ["refused", "refused"])
    assert.strictEqual((await activitiesOf(server, company.token, deal.id))[0].body, "Called, no answer")
    assert.strictEqual((await activitiesOf(server, company.token, deal.id)).length, 7)
  })

  it("soft-deletes keeping the id and conversation link; restore is idempotent and needs deal.delete", async () => {
    const company = await createCompany(server)
    await dealSetup(server, company.token)
    const { conversationId } = await conversationOn(server, company.token)
    const [{ contact_id }] = await query(server, "SELECT contact_id FROM conversations WHERE id = $1", [conversationId])
    const deal = await createDeal(server, company.token, { contact_id, conversation_id: conversationId })
    assert.strictEqual(deal.conversation_id, conversationId)
    const twice = await request(server, "POST", "/v1/deals", { token: company.token, body: { contact_id, title: "again", conversation_id: conversationId } })
    assert.deepStrictEqual(twice.body.errors, { conversation_id: ["The conversation already has a deal."] })

    const agent = await addUser(server, company.id, { role: "agent" })
    const agentToken = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
    assert.strictEqual((await request(server, "DELETE", `/v1/deals/${deal.id}`, { token: agentToken })).status, 403)
    assert.strictEqual((await request(server, "POST", `/v1/deals/${deal.id}`, { token: agentToken, body: { title: "agent edit" } })).status, 200)

    assert.deepStrictEqual(await ok(server, "DELETE", `/v1/deals/${deal.id}`, company.token), { message: "Deal deleted." })
    assert.strictEqual((await request(server, "GET", `/v1/deals/${deal.id}`, { token: company.token })).status, 404)
    assert.strictEqual((await request(server, "DELETE", `/v1/deals/${deal.id}`, { token: company.token })).status, 404)
    assert.strictEqual((await ok(server, "GET", "/v1/deals", company.token)).pagination.total, 0)
    const [row] = await query(server, "SELECT conversation_id, deleted_at FROM deals WHERE id = $1", [deal.id])
    assert.strictEqual(row.conversation_id, conversationId)
    assert.notStrictEqual(row.deleted_at, null)

    assert.strictEqual((await request(server, "POST", `/v1/deals/${deal.id}/restore`, { token: agentToken })).status, 403)
    const restored = await ok(server, "POST", `/v1/deals/${deal.id}/restore`, company.token)
    assert.deepStrictEqual([restored.id, restored.deleted_at, restored.conversation_id, restored.title], [deal.id, null, conversationId, "agent edit"])
    const again = await ok(server, "POST", `/v1/deals/${deal.id}/restore`, company.token)
    assert.deepStrictEqual(again, restored)
    assert.strictEqual((await eventsOf(server, company.id, "deal.deleted")).length, 1)
    assert.strictEqual((await eventsOf(server, company.id, "deal.restored")).length, 1)
  })

  it("every deals route is in the OpenAPI document", async () => {
    const doc = await request(server, "GET", "/openapi.json")
    assert.strictEqual(doc.status, 200)
    for (const path of [
      "/v1/deals", "/v1/deals/{deal}", "/v1/deals/{deal}/restore", "/v1/deals/{deal}/activities", "/v1/deals/{deal}/notes",
      "/v1/deals/{deal}/tasks", "/v1/contacts/{contact}/deals", "/v1/funnels", "/v1/funnels/{funnel}", "/v1/funnels/{funnel}/stages",
      "/v1/funnels/{funnel}/stages/{stage}", "/v1/deal-types", "/v1/deal-types/{dealType}", "/v1/lost-reasons",
      "/v1/lost-reasons/{lostReason}", "/v1/deal-tasks", "/v1/deal-tasks/{task}", "/v1/company/deal-settings"
    ]) assert.ok(doc.body.paths[path], path)
  })

  it("lists the deal and deal task events in the system-events catalog", async () => {
    const company = await createCompany(server)
    const keys = async (type: string) => ((await ok(server, "GET", `/v1/system-events?type=${type}`, company.token)) as Array<{ key: string }>).map((e) => e.key)
    assert.deepStrictEqual((await keys("deal")).sort(), [
      "deal.created", "deal.deleted", "deal.lost", "deal.restored", "deal.stage_changed", "deal.updated", "deal.won"
    ])
    assert.deepStrictEqual((await keys("deal_task")).sort(), ["deal_task.assigned", "deal_task.created", "deal_task.reminder", "deal_task.updated"])
  })

  it("every deals endpoint needs the plan feature deals (403 feature gate)", async () => {
    const free = await createCompany(server, { plan: "free" })
    const routes: Array<[string, string, unknown?]> = [
      ["GET", "/v1/deals"], ["POST", "/v1/deals", { contact_id: 1, title: "x" }], ["GET", "/v1/deals/1"],
      ["POST", "/v1/deals/1", { title: "x" }], ["DELETE", "/v1/deals/1"], ["POST", "/v1/deals/1/restore"],
      ["GET", "/v1/deals/1/activities"], ["POST", "/v1/deals/1/notes", { body: "x" }], ["GET", "/v1/deals/1/tasks"],
      ["GET", "/v1/contacts/1/deals"], ["GET", "/v1/funnels"], ["POST", "/v1/funnels", { name: "x" }], ["GET", "/v1/funnels/1"],
      ["PATCH", "/v1/funnels/1", { name: "x" }], ["DELETE", "/v1/funnels/1"], ["POST", "/v1/funnels/1/stages", { name: "x", type: "open" }],
      ["PATCH", "/v1/funnels/1/stages/1", { name: "x" }], ["DELETE", "/v1/funnels/1/stages/1"], ["GET", "/v1/deal-types"],
      ["POST", "/v1/deal-types", { name: "x" }], ["PATCH", "/v1/deal-types/1", { name: "x" }], ["DELETE", "/v1/deal-types/1"],
      ["GET", "/v1/lost-reasons"], ["POST", "/v1/lost-reasons", { name: "x" }], ["PATCH", "/v1/lost-reasons/1", { name: "x" }],
      ["DELETE", "/v1/lost-reasons/1"], ["GET", "/v1/deal-tasks"], ["POST", "/v1/deal-tasks", { deal_id: 1, title: "x" }],
      ["PATCH", "/v1/deal-tasks/1", { title: "x" }], ["DELETE", "/v1/deal-tasks/1"], ["GET", "/v1/company/deal-settings"],
      ["POST", "/v1/company/deal-settings", {}]
    ]
    for (const [method, path, body] of routes) {
      const res = await request(server, method, path, { token: free.token, body })
      assert.deepStrictEqual([res.status, res.body], [403, {
        message: "Your plan does not include the deals feature.",
        error: "feature_not_available",
        feature: "deals",
        required_plan: "business"
      }], `${method} ${path}`)
    }
  })

  it("another company's deal is 404 on every deal route and invalid in bodies", async () => {
    const owner = await createCompany(server)
    const other = await createCompany(server)
    const { contact } = await dealSetup(server, owner.token)
    const deal = await createDeal(server, owner.token, { contact_id: contact.id })
    const theirs = await dealSetup(server, other.token)
    const cases: Array<[string, string, unknown?]> = [
      ["GET", `/v1/deals/${deal.id}`],
      ["POST", `/v1/deals/${deal.id}`, { title: "stolen" }],
      ["DELETE", `/v1/deals/${deal.id}`],
      ["POST", `/v1/deals/${deal.id}/restore`],
      ["GET", `/v1/deals/${deal.id}/activities`],
      ["POST", `/v1/deals/${deal.id}/notes`, { body: "x" }],
      ["GET", `/v1/deals/${deal.id}/tasks`],
      ["GET", `/v1/contacts/${contact.id}/deals`]
    ]
    for (const [method, path, body] of cases) {
      const res = await request(server, method, path, { token: other.token, body })
      assert.strictEqual(res.status, 404, `${method} ${path}: ${JSON.stringify(res.body)}`)
    }
    assert.deepStrictEqual((await request(server, "GET", `/v1/deals/${deal.id}`, { token: other.token })).body, { message: "Deal not found." })
    const foreign = await request(server, "POST", "/v1/deals", {
      token: other.token,
      body: { contact_id: contact.id, title: "x" }
    })
    assert.deepStrictEqual(foreign.body.errors, { contact_id: ["The selected contact_id is invalid."] })
    const foreignStage = await request(server, "POST", "/v1/deals", {
      token: other.token,
      body: { contact_id: theirs.contact.id, title: "x", funnel_stage_id: deal.funnel_stage_id }
    })
    assert.deepStrictEqual(foreignStage.body.errors, { funnel_stage_id: ["The selected funnel_stage_id is invalid."] })
    assert.strictEqual((await ok(server, "GET", "/v1/deals", other.token)).pagination.total, 0)
    assert.strictEqual((await ok(server, "GET", `/v1/deals/${deal.id}`, owner.token)).title, "Deal")
  })
})

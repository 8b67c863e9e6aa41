import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { createDeal, createFunnel, dealSetup, ok } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

describe("funnels and stages", () => {
  it("creates funnels with default or given stages; the first is the default; lists, reads, renames, reorders", async () => {
    const company = await createCompany(server)
    const sales = await createFunnel(server, company.token, { name: " Sales " })
    assert.deepStrictEqual(Object.keys(sales).sort(), ["company_id", "id", "is_default", "name", "order", "stages"])
    assert.deepStrictEqual([sales.name, sales.company_id, sales.is_default], ["Sales", company.id, true])
    assert.deepStrictEqual(sales.stages.map((s: any) => [s.name, s.type, s.order, s.funnel_id]), [
      ["New", "open", 0, sales.id],
      ["Won", "success", 1, sales.id],
      ["Lost", "failed", 2, sales.id]
    ])
    assert.deepStrictEqual(Object.keys(sales.stages[0]).sort(), ["funnel_id", "id", "name", "order", "type"])

    const support = await createFunnel(server, company.token, {
      name: "Support",
      order: 1,
      stages: [{ name: "Triage", type: "open" }, { name: "Solved", type: "success" }]
    })
    assert.strictEqual(support.is_default, false)
    const noOpen = await request(server, "POST", "/v1/funnels", {
      token: company.token,
      body: { name: "Bad", stages: [{ name: "Won", type: "success" }] }
    })
    assert.deepStrictEqual([noOpen.status, noOpen.body.errors], [422, { stages: ["A funnel needs at least one open stage."] }])
    const badType = await request(server, "POST", "/v1/funnels", { token: company.token, body: { name: "Bad", stages: [{ name: "x", type: "closed" }] } })
    assert.strictEqual(badType.status, 422)

    // Making Support the default takes it from Sales; the default cannot be switched off directly.
    const promoted = await ok(server, "PATCH", `/v1/funnels/${support.id}`, company.token, { is_default: true, name: "Help desk" })
    assert.deepStrictEqual([promoted.is_default, promoted.name], [true, "Help desk"])
    assert.strictEqual((await ok(server, "GET", `/v1/funnels/${sales.id}`, company.token)).is_default, false)
    const off = await request(server, "PATCH", `/v1/funnels/${support.id}`, { token: company.token, body: { is_default: false } })
    assert.strictEqual(off.status, 422)

    const listed = await ok(server, "GET", "/v1/funnels", company.token)
    assert.deepStrictEqual(listed.map((f: any) => f.name), ["Sales", "Help desk"])
  })

  it("adds, edits and deletes stages; a funnel keeps one open stage; a stage or funnel holding deals cannot go", async () => {
    const company = await createCompany(server)
    const { funnel, contact, open, won } = await dealSetup(server, company.token)

    const qualified = await ok(server, "POST", `/v1/funnels/${funnel.id}/stages`, company.token, { name: "Qualified", type: "open" }, 201)
    assert.deepStrictEqual([qualified.name, qualified.type, qualified.order, qualified.funnel_id], ["Qualified", "open", 3, funnel.id])
    const renamed = await ok(server, "PATCH", `/v1/funnels/${funnel.id}/stages/${qualified.id}`, company.token, { name: "Hot", order: 1 })
    assert.deepStrictEqual([renamed.name, renamed.order], ["Hot", 1])

    // Two open stages: one may become failed, the last one may not.
    await ok(server, "PATCH", `/v1/funnels/${funnel.id}/stages/${qualified.id}`, company.token, { type: "failed" })
    const lastOpen = await request(server, "PATCH", `/v1/funnels/${funnel.id}/stages/${open.id}`, { token: company.token, body: { type: "success" } })
    assert.deepStrictEqual([lastOpen.status, lastOpen.body.errors], [422, { type: ["A funnel needs at least one open stage."] }])
    const deleteLastOpen = await request(server, "DELETE", `/v1/funnels/${funnel.id}/stages/${open.id}`, { token: company.token })
    assert.deepStrictEqual([deleteLastOpen.status, deleteLastOpen.body.error_code], [422, "last_open_stage"])

    const deal = await createDeal(server, company.token, { contact_id: contact.id, funnel_id: funnel.id, funnel_stage_id: won.id })
    const holding = await request(server, "DELETE", `/v1/funnels/${funnel.id}/stages/${won.id}`, { token: company.token })
    assert.deepStrictEqual([holding.status, holding.body.error_code], [422, "stage_has_deals"])
    const funnelHolding = await request(server, "DELETE", `/v1/funnels/${funnel.id}`, { token: company.token })
    assert.deepStrictEqual([funnelHolding.status, funnelHolding.body.error_code], [422, "funnel_has_deals"])
    // A soft-deleted deal still keeps its stage.
    await ok(server, "DELETE", `/v1/deals/${deal.id}`, company.token)
    assert.strictEqual((await request(server, "DELETE", `/v1/funnels/${funnel.id}/stages/${won.id}`, { token: company.token })).status, 422)

    const removed = await request(server, "DELETE", `/v1/funnels/${funnel.id}/stages/${qualified.id}`, { token: company.token })
    assert.deepStrictEqual([removed.status, removed.body], [200, { data: { message: "Stage deleted." } }])
    const after = await ok(server, "GET", `/v1/funnels/${funnel.id}`, company.token)
    assert.deepStrictEqual(after.stages.map((s: any) => s.id), [open.id, won.id, funnel.stages[2].id])

    // An empty funnel can go; the default passes to the next one.
    const spare = await createFunnel(server, company.token, { name: "Spare" })
    const other = await createFunnel(server, company.token, { name: "Other", is_default: true })
    const gone = await request(server, "DELETE", `/v1/funnels/${other.id}`, { token: company.token })
    assert.deepStrictEqual([gone.status, gone.body], [200, { data: { message: "Funnel deleted." } }])
    assert.strictEqual((await request(server, "GET", `/v1/funnels/${other.id}`, { token: company.token })).status, 404)
    const defaults = (await ok(server, "GET", "/v1/funnels", company.token)).filter((f: any) => f.is_default)
    assert.deepStrictEqual(defaults.map((f: any) => f.id), [funnel.id])
    assert.ok(spare.id > 0)
  })

  it("deal types: list, create, update, delete", async () => {
    const company = await createCompany(server)
    const a = await ok(server, "POST", "/v1/deal-types", company.token, { name: "New business" }, 201)
    const b = await ok(server, "POST", "/v1/deal-types", company.token, { name: "Renewal", order: 0 }, 201)
    assert.deepStrictEqual(Object.keys(a).sort(), ["id", "name", "order"])
    assert.deepStrictEqual([a.order, b.order], [0, 0])
    const moved = await ok(server, "PATCH", `/v1/deal-types/${a.id}`, company.token, { order: 5, name: "Upsell" })
    assert.deepStrictEqual(moved, { id: a.id, name: "Upsell", order: 5 })
    assert.deepStrictEqual((await ok(server, "GET", "/v1/deal-types", company.token)).map((t: any) => t.id), [b.id, a.id])
    assert.deepStrictEqual(await ok(server, "DELETE", `/v1/deal-types/${b.id}`, company.token), { message: "Deal type deleted." })
    assert.strictEqual((await request(server, "DELETE", `/v1/deal-types/${b.id}`, { token: company.token })).status, 404)
    assert.strictEqual((await request(server, "POST", "/v1/deal-types", { token: company.token, body: { name: "" } })).status, 422)
  })

  it("lost reasons: unique names per company, is_active, order; editing needs lost_reason.manage", async () => {
    const company = await createCompany(server)
    const price = await ok(server, "POST", "/v1/lost-reasons", company.token, { name: "Price" }, 201)
    assert.deepStrictEqual(Object.keys(price).sort(), ["company_id", "created_at", "id", "is_active", "name", "order", "updated_at"])
    assert.deepStrictEqual([price.is_active, price.order, price.company_id], [true, 0, company.id])
    const dup = await request(server, "POST", "/v1/lost-reasons", { token: company.token, body: { name: "PRICE" } })
    assert.deepStrictEqual([dup.status, dup.body.errors], [422, { name: ["The name has already been taken."] }])
    const timing = await ok(server, "POST", "/v1/lost-reasons", company.token, { name: "Timing", is_active: false, order: 3 }, 201)
    const clash = await request(server, "PATCH", `/v1/lost-reasons/${timing.id}`, { token: company.token, body: { name: "price" } })
    assert.strictEqual(clash.status, 422)
    const active = await ok(server, "PATCH", `/v1/lost-reasons/${timing.id}`, company.token, { is_active: true })
    assert.strictEqual(active.is_active, true)
    // Another company may use the same name.
    const other = await createCompany(server)
    await ok(server, "POST", "/v1/lost-reasons", other.token, { name: "Price" }, 201)

    const agent = await addUser(server, company.id, { role: "agent" })
    const agentToken = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
    assert.strictEqual((await request(server, "GET", "/v1/lost-reasons", { token: agentToken })).status, 200)
    assert.strictEqual((await request(server, "POST", "/v1/lost-reasons", { token: agentToken, body: { name: "x" } })).status, 403)
    assert.strictEqual((await request(server, "PATCH", `/v1/lost-reasons/${price.id}`, { token: agentToken, body: { name: "x" } })).status, 403)
    assert.strictEqual((await request(server, "DELETE", `/v1/lost-reasons/${price.id}`, { token: agentToken })).status, 403)
    const manager = await addUser(server, company.id, { role: "manager" })
    const managerToken = (await mobileLogin(server, manager.email, manager.password)).body.data.token as string
    assert.strictEqual((await request(server, "PATCH", `/v1/lost-reasons/${price.id}`, { token: managerToken, body: { order: 9 } })).status, 200)
    assert.strictEqual((await request(server, "POST", "/v1/funnels", { token: agentToken, body: { name: "x" } })).status, 403)

    assert.deepStrictEqual(await ok(server, "DELETE", `/v1/lost-reasons/${price.id}`, company.token), { message: "Lost reason deleted." })
    assert.deepStrictEqual((await ok(server, "GET", "/v1/lost-reasons", company.token)).map((r: any) => r.name), ["Timing"])
  })

  it("another company's funnel, stage, deal type and lost reason are 404 on every route", async () => {
    const owner = await createCompany(server)
    const other = await createCompany(server)
    const funnel = await createFunnel(server, owner.token)
    const stage = funnel.stages[0]
    const type = await ok(server, "POST", "/v1/deal-types", owner.token, { name: "Mine" }, 201)
    const reason = await ok(server, "POST", "/v1/lost-reasons", owner.token, { name: "Mine" }, 201)
    await createFunnel(server, other.token, { name: "Theirs" })
    const cases: Array<[string, string, unknown?]> = [
      ["GET", `/v1/funnels/${funnel.id}`],
      ["PATCH", `/v1/funnels/${funnel.id}`, { name: "x" }],
      ["DELETE", `/v1/funnels/${funnel.id}`],
      ["POST", `/v1/funnels/${funnel.id}/stages`, { name: "x", type: "open" }],
      ["PATCH", `/v1/funnels/${funnel.id}/stages/${stage.id}`, { name: "x" }],
      ["DELETE", `/v1/funnels/${funnel.id}/stages/${stage.id}`],
      ["PATCH", `/v1/deal-types/${type.id}`, { name: "x" }],
      ["DELETE", `/v1/deal-types/${type.id}`],
      ["PATCH", `/v1/lost-reasons/${reason.id}`, { name: "x" }],
      ["DELETE", `/v1/lost-reasons/${reason.id}`]
    ]
    for (const [method, path, body] of cases) {
      const res = await request(server, method, path, { token: other.token, body })
      assert.strictEqual(res.status, 404, `${method} ${path}: ${JSON.stringify(res.body)}`)
    }
    // A stage of another funnel of the same company is not found under this one.
    const second = await createFunnel(server, owner.token, { name: "Second" })
    assert.strictEqual((await request(server, "PATCH", `/v1/funnels/${second.id}/stages/${stage.id}`, { token: owner.token, body: { name: "x" } })).status, 404)
    assert.deepStrictEqual((await ok(server, "GET", "/v1/deal-types", other.token)), [])
    assert.strictEqual((await ok(server, "GET", `/v1/funnels/${funnel.id}`, owner.token)).name, "Sales")
  })
})

import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { tone } from "../media/support.ts"
import { createCompany, request, type RunningServer, startServer, upload } from "../support/TestServer.ts"
import { actionNode, chain, edge, ok, triggerNode, trigger } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const builder = (token: string, id: string, body: unknown) => request(server, "PATCH", `/v1/automations/${id}/builder`, { token, body })

describe("automations over HTTP", () => {
  it("creates, lists, reads, renames, activates and deletes; each builder save is a new version", async () => {
    const company = await createCompany(server)
    const created = await ok(server, "POST", "/v1/automations", company.token, { name: "Welcome", description: "Greets", status: "draft" }, 201)
    assert.deepStrictEqual(
      Object.keys(created).sort(),
      ["activeVersionId", "companyId", "createdAt", "createdBy", "description", "edges", "executionsCount", "healthStatus", "id",
        "lastRunAt", "latestVersionId", "name", "nodes", "status", "templateId", "triggers", "updatedAt", "updatedBy"]
    )
    assert.deepStrictEqual(
      [created.companyId, created.status, created.healthStatus, created.activeVersionId, created.latestVersionId, created.executionsCount, typeof created.createdBy],
      [company.id, "draft", "ok", null, null, 0, "number"]
    )
    const noGraph = await request(server, "PATCH", `/v1/automations/${created.id}`, { token: company.token, body: { status: "active" } })
    assert.deepStrictEqual([noGraph.status, Object.keys(noGraph.body.errors)], [422, ["status"]])

    const graph = chain([actionNode("a1", "add-tag", { tag_id: 1 })])
    const v1 = await ok(server, "PATCH", `/v1/automations/${created.id}/builder`, company.token, { ...graph, triggers: [trigger("contact.created")] })
    assert.isString(v1.latestVersionId)
    assert.strictEqual(v1.activeVersionId, null)
    assert.deepStrictEqual(v1.nodes.map((n: any) => n.id), ["t", "a1"])
    const active = await ok(server, "PATCH", `/v1/automations/${created.id}`, company.token, { status: "active", name: "Hello" })
    assert.deepStrictEqual([active.status, active.name, active.activeVersionId], ["active", "Hello", v1.latestVersionId])

    const v2 = await ok(server, "PATCH", `/v1/automations/${created.id}/builder`, company.token, { ...graph, triggers: [trigger("contact.updated")] })
    assert.notStrictEqual(v2.latestVersionId, v1.latestVersionId)
    assert.strictEqual(v2.activeVersionId, v2.latestVersionId, "an active automation publishes each new version")
    const paused = await ok(server, "PATCH", `/v1/automations/${created.id}`, company.token, { status: "paused" })
    assert.deepStrictEqual([paused.status, paused.activeVersionId], ["paused", v2.latestVersionId])
    const bad = await request(server, "PATCH", `/v1/automations/${created.id}`, { token: company.token, body: { status: "running" } })
    assert.deepStrictEqual([bad.status, Object.keys(bad.body.errors)], [422, ["status"]])

    const listed = await ok(server, "GET", "/v1/automations", company.token)
    assert.deepStrictEqual(listed.map((a: any) => a.id), [created.id])
    assert.strictEqual((await ok(server, "GET", `/v1/automations/${created.id}`, company.token)).triggers[0].event, "contact.updated")
    assert.deepStrictEqual((await ok(server, "GET", `/v1/automations/${created.id}/runs`, company.token)).items, [])

    const boot = await ok(server, "GET", "/v1/automations/bootstrap", company.token)
    assert.deepStrictEqual(Object.keys(boot).sort(), [
      "actionGroups", "actionLibraryGroups", "applicationSources", "automations", "configs", "edges", "nodes", "runSteps", "runs",
      "templateCategories", "templateDefinitions", "templates", "triggerChannelPivots", "triggerConditions", "triggers", "versions"
    ].sort())
    const actions = boot.actionGroups.flatMap((g: any) => g.actions)
    assert.includeMembers(actions.map((a: any) => a.id), [
      "msgr_a-send-message", "msgr_b-send-message", "send-message", "send-template", "add-tag", "remove-tag", "assign-conversation",
      "update-contact-field", "opt-out-contact", "create-deal", "move-deal-stage", "notify-user", "http-request", "condition", "wait"
    ])
    const addTag = actions.find((a: any) => a.id === "add-tag")
    assert.deepStrictEqual(addTag.schema.required, ["tag_id"])
    assert.strictEqual(boot.nodes.length, 2)
    assert.strictEqual(boot.triggers[0].automation_id, created.id)

    assert.deepStrictEqual(await ok(server, "DELETE", `/v1/automations/${created.id}`, company.token), { message: "Automation deleted." })
    assert.strictEqual((await request(server, "GET", `/v1/automations/${created.id}`, { token: company.token })).status, 404)
  })

  it("answers 422 naming the node or edge for each builder rule", async () => {
    const company = await createCompany(server)
    const { id } = await ok(server, "POST", "/v1/automations", company.token, { name: "Rules", status: "draft" }, 201)
    const expect422 = async (body: unknown, field: string, pattern?: RegExp) => {
      const res = await builder(company.token, id, body)
      assert.strictEqual(res.status, 422, JSON.stringify(res.body))
      assert.property(res.body.errors, field, JSON.stringify(res.body.errors))
      if (pattern) assert.match(res.body.errors[field][0], pattern)
    }
    await expect422({ nodes: [], edges: [], triggers: [] }, "nodes")
    await expect422({ nodes: [actionNode("a", "add-tag", { tag_id: 1 })], edges: [] }, "nodes", /exactly one trigger/)
    await expect422({ nodes: [triggerNode, { ...triggerNode, id: "t2" }], edges: [] }, "nodes", /exactly one trigger/)
    await expect422({ nodes: [triggerNode, actionNode("a", "teleport")], edges: [edge("t", "a")] }, "nodes.1.actionId", /Node a has an unknown actionId teleport/)
    await expect422({ nodes: [triggerNode, actionNode("a", "add-tag", { tag: 1 })], edges: [edge("t", "a")] }, "nodes.1.data", /node a/)
    await expect422({ nodes: [triggerNode, actionNode("w", "wait", { duration: 5, unit: "weeks" })], edges: [edge("t", "w")] }, "nodes.1.data")
    await expect422({ nodes: [triggerNode, actionNode("w", "wait", { until: "25:00" })], edges: [edge("t", "w")] }, "nodes.1.data")
    await expect422({ nodes: [triggerNode, actionNode("a", "add-tag", { tag_id: 1 })], edges: [edge("t", "a"), edge("a", "ghost")] }, "edges.1.target", /Edge a-ghost ends at node ghost/)
    await expect422({ nodes: [triggerNode, actionNode("a", "add-tag", { tag_id: 1 })], edges: [edge("nowhere", "a")] }, "edges.0.source")
    await expect422({ nodes: [triggerNode, actionNode("a", "add-tag", { tag_id: 1 }), actionNode("b", "add-tag", { tag_id: 2 })], edges: [edge("t", "a")] }, "nodes.2", /Node b is not reachable/)
    await expect422({
      nodes: [triggerNode, actionNode("a", "add-tag", { tag_id: 1 }), actionNode("b", "remove-tag", { tag_id: 1 })],
      edges: [edge("t", "a"), edge("a", "b"), edge("b", "a")]
    }, "edges.2", /closes a cycle without a wait/)
    const cond = actionNode("c", "condition", { conditions: [{ type: "text_contains", value: "hi" }], conditionsJoiner: "and" })
    await expect422({ nodes: [triggerNode, cond, actionNode("a", "add-tag", { tag_id: 1 })], edges: [edge("t", "c"), edge("c", "a")] }, "edges.1.sourceHandle")
    await expect422({ ...chain([actionNode("a", "add-tag", { tag_id: 1 })]), triggers: [trigger("message.deleted")] }, "triggers.0.event")
    await expect422({ ...chain([actionNode("a", "add-tag", { tag_id: 1 })]), triggers: [trigger("message.created", { conditions: [{ type: "text_matches", value: "(a+)+$" }] })] }, "triggers.0.conditions.0.value", /repeat/)
    await expect422({ ...chain([actionNode("a", "add-tag", { tag_id: 1 })]), triggers: [trigger("message.created", { conditions: [{ type: "text_matches", value: "x".repeat(201) }] })] }, "triggers.0.conditions.0.value")
    await expect422({ ...chain([actionNode("h", "http-request", { url: "ftp://x" })]) }, "nodes.1.data")
    await expect422({ ...chain([actionNode("n", "notify-user", { user_id: 1, message: "x".repeat(20_000) })]) }, "nodes.1.data.message", /4096/)
    await expect422({ ...chain([actionNode("s", "msgr_a-send-message", { voice_mode: "upload" })]) }, "nodes.1.data")
    await expect422({ ...chain([actionNode("as", "assign-conversation", { user_id: 1, team_id: 2 })]) }, "nodes.1.data", /exactly one/)

    // A cycle through a wait is allowed.
    const loop = await builder(company.token, id, {
      nodes: [triggerNode, actionNode("a", "add-tag", { tag_id: 1 }), actionNode("w", "wait", { duration: 1, unit: "days" })],
      edges: [edge("t", "a"), edge("a", "w"), edge("w", "a")],
      triggers: [trigger("contact.created")]
    })
    assert.strictEqual(loop.status, 200, JSON.stringify(loop.body))
  })

  it("uploads a voice note for the messenger send actions as a flat object", async () => {
    const company = await createCompany(server)
    const res = await upload(server, company.token, "/v1/automations/media/voice", { bytes: tone("wav", 1), name: "hi.wav", type: "audio/wav" })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.deepStrictEqual(Object.keys(res.body).sort(), ["duration", "expires_at", "media_id", "mime_type", "size", "type"])
    assert.deepStrictEqual([res.body.type, res.body.mime_type, res.body.expires_at], ["voice", "audio/ogg", null])
    assert.isAbove(res.body.size, 0)
    const notAudio = await upload(server, company.token, "/v1/automations/media/voice", { bytes: new TextEncoder().encode("hello"), name: "a.txt", type: "text/plain" })
    assert.deepStrictEqual([notAudio.status, Object.keys(notAudio.body.errors)], [422, ["file"]])
  })

  it("answers 404 for another company's automation and runs on every route", async () => {
    const owner = await createCompany(server)
    const other = await createCompany(server)
    const { id } = await ok(server, "POST", "/v1/automations", owner.token, { name: "Mine", status: "draft" }, 201)
    const graph = { ...chain([actionNode("a", "add-tag", { tag_id: 1 })]), triggers: [trigger("contact.created")] }
    const runId = "00000000-0000-4000-8000-000000000000"
    for (const [method, path, body] of [
      ["GET", `/v1/automations/${id}`, undefined],
      ["PATCH", `/v1/automations/${id}`, { name: "Theirs" }],
      ["PATCH", `/v1/automations/${id}/builder`, graph],
      ["GET", `/v1/automations/${id}/runs`, undefined],
      ["GET", `/v1/automations/${id}/runs/${runId}`, undefined],
      ["DELETE", `/v1/automations/${id}`, undefined],
      ["GET", "/v1/automations/not-a-uuid", undefined]
    ] as const) {
      const res = await request(server, method, path, { token: other.token, body })
      assert.strictEqual(res.status, 404, `${method} ${path}: ${JSON.stringify(res.body)}`)
    }
    assert.deepStrictEqual(await ok(server, "GET", "/v1/automations", other.token), [])
    assert.strictEqual((await ok(server, "GET", `/v1/automations/${id}`, owner.token)).name, "Mine")
  })
})

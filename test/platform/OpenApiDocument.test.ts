import { assert, describe, it } from "@effect/vitest"
import { OpenApi } from "effect/http-api"
import { Api } from "../../src/Api.ts"
import { Catalog } from "../../src/events/Catalog.ts"
import { dedupeBranches, exampleOf } from "../../src/platform/OpenApiExamples.ts"

const doc = OpenApi.fromApi(Api) as Record<string, any>
const methods = ["get", "put", "post", "delete", "patch"]
const operations = Object.entries(doc.paths as Record<string, any>).flatMap(([path, item]) =>
  methods.filter((m) => item[m] !== undefined).map((m) => ({ path, method: m, operation: item[m] })))

describe("the OpenAPI document", () => {
  it("has an example on every operation", () => {
    assert.isAbove(operations.length, 200)
    const without = operations.filter(({ operation }) =>
      !JSON.stringify(operation).includes('"example"') && operation["x-codeSamples"] === undefined)
    assert.deepStrictEqual(without.map(({ method, path }) => `${method} ${path}`), [])
    const create = doc.paths["/v1/tags"].post.requestBody.content["application/json"].example
    assert.strictEqual(typeof create.name, "string")
    const path = doc.paths["/v1/tags/{tag}"].get.parameters.find((p: any) => p.name === "tag")
    assert.match(String(path.example), /^\d+$/)
  })

  it("repeats no member of an anyOf or oneOf list", () => {
    const repeated: Array<string> = []
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) return node.forEach(walk)
      if (node === null || typeof node !== "object") return
      for (const key of ["anyOf", "oneOf"]) {
        const list = (node as any)[key]
        if (Array.isArray(list) && new Set(list.map((m) => JSON.stringify(m))).size !== list.length) repeated.push(JSON.stringify(list))
      }
      Object.values(node).forEach(walk)
    }
    walk(doc)
    assert.deepStrictEqual(repeated, [])
  })

  it("lists every event of the catalog as a webhook carrying the envelope", () => {
    assert.sameMembers(Object.keys(doc.webhooks), Catalog.map((e) => e.key))
    const created = doc.webhooks["message.created"].post
    const body = created.requestBody.content["application/json"]
    assert.strictEqual(body.example.event, "message.created")
    assert.match(body.example.id, /^evt_/)
    assert.sameMembers(Object.keys(body.example), ["id", "seq", "event", "company_id", "occurred_at", "data"])
    assert.sameMembers(doc.components.schemas.EventEnvelope.required, ["id", "seq", "event", "company_id", "occurred_at", "data"])
    assert.sameMembers(created.parameters.map((p: any) => p.name), ["webhook-id", "webhook-timestamp", "webhook-signature"])
  })
})

describe("examples from schemas", () => {
  it("follow types, enums, patterns, nullable branches and references", () => {
    const mini = { components: { schemas: { Tag: { type: "object", properties: { id: { type: "integer" }, created_at: { type: "string" } } } } } }
    assert.deepStrictEqual(exampleOf(mini, { $ref: "#/components/schemas/Tag" }), { id: 1, created_at: "2026-11-28T09:00:00.000Z" })
    assert.strictEqual(exampleOf(mini, { anyOf: [{ type: "null" }, { type: "string", enum: ["free", "pro"] }] }), "free")
    assert.strictEqual(exampleOf(mini, { type: "string", pattern: "^\\d+$" }, "contact"), "1")
    assert.strictEqual(exampleOf(mini, { type: "integer", minimum: 5 }), 5)
    assert.deepStrictEqual(exampleOf(mini, { type: "array", items: { type: "string" } }, "emails"), ["ann@acme.test"])
  })

  it("fold repeated branches, and a single one left into its parent", () => {
    const node: any = { properties: { a: { anyOf: [{ type: "string" }, { type: "null" }, { type: "null" }] }, b: { anyOf: [{ type: "null" }, { type: "null" }] } } }
    dedupeBranches(node)
    assert.deepStrictEqual(node.properties.a.anyOf, [{ type: "string" }, { type: "null" }])
    assert.deepStrictEqual(node.properties.b, { type: "null" })
  })
})

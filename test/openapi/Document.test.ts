import { assert, describe, it } from "@effect/vitest"
import { OpenApi } from "effect/http-api"
import { Api } from "../../src/Api.ts"

const doc = OpenApi.fromApi(Api) as Record<string, any>
const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
  Object.entries(item).map(([method, operation]) => ({ key: `${method.toUpperCase()} ${path}`, operation }))
)

describe("the generated OpenAPI document", () => {
  it("declares the bearer scheme in lower case (Scalar then shows Authorization: Bearer)", () => {
    assert.deepStrictEqual(doc.components.securitySchemes.bearer, { type: "http", scheme: "bearer" })
  })

  it("gives every operation a summary", () => {
    const missing = operations.filter((o) => typeof o.operation.summary !== "string" || o.operation.summary === "").map((o) => o.key)
    assert.deepStrictEqual(missing, [])
  })

  it("documents 400/413/415 on bodies and 429 with Retry-After and X-RateLimit-* on authenticated operations", () => {
    const create = doc.paths["/v1/contacts"].post
    for (const status of ["400", "413", "415", "422", "429"]) assert.ok(create.responses[status] !== undefined, status)
    const tooMany = doc.components.responses.TooManyRequests
    assert.deepStrictEqual(Object.keys(tooMany.headers).sort(), ["Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-Request-Id"])
    assert.ok(doc.paths["/v1/contacts/{contact}"].get.responses["200"].headers["X-Request-Id"] !== undefined)
    // No body, no 415.
    assert.strictEqual(doc.paths["/v1/contacts/{contact}"].get.responses["415"], undefined)
  })

  it("refers to entities as components and puts no ±2^53 bounds on integers", () => {
    for (const name of ["Contact", "Message", "Deal", "Team", "Invitation", "Company"]) assert.ok(doc.components.schemas[name] !== undefined, name)
    const get = doc.paths["/v1/contacts/{contact}"].get.responses["200"].content["application/json"].schema
    assert.deepStrictEqual(get.properties.data, { $ref: "#/components/schemas/Contact" })
    assert.notInclude(JSON.stringify(doc), "9007199254740991")
  })
})

import { assert, describe, it } from "@effect/vitest"
import { NUMERIC_STRING, typeExpression } from "../../scripts/client/Schema.ts"

describe("JSON Schema to TypeScript (the fetch client generator)", () => {
  it("writes references, nullable unions, enums, arrays and files", () => {
    assert.strictEqual(typeExpression({ $ref: "#/components/schemas/Tag" }), "Tag")
    assert.strictEqual(typeExpression({ anyOf: [{ type: "string" }, { type: "null" }] }), "string | null")
    assert.strictEqual(typeExpression({ type: "string", enum: ["open", "closed"] }), `"open" | "closed"`)
    assert.strictEqual(typeExpression({ type: "array", items: { type: "integer" } }), "Array<number>")
    assert.strictEqual(typeExpression({ type: "string", format: "binary" }), "Blob")
    assert.strictEqual(typeExpression({ not: {} }), "never")
  })

  it("writes objects with their required and optional keys, quoted where needed, and maps", () => {
    const object = typeExpression({
      type: "object",
      properties: { id: { type: "integer" }, "files[]": { type: "array", items: { type: "string" } } },
      required: ["id"],
      additionalProperties: false
    })
    assert.strictEqual(object, `{\n  id: number\n  "files[]"?: Array<string>\n}`)
    assert.strictEqual(
      typeExpression({ type: "object", additionalProperties: { type: "array", items: { type: "string" } } }),
      "{\n  [key: string]: Array<string>\n}"
    )
    assert.strictEqual(typeExpression({ type: "object" }), "{\n  [key: string]: unknown\n}")
  })

  it("lets a URL take a number where the contract writes an integer as a string, and only there", () => {
    const id = { type: "string", pattern: NUMERIC_STRING }
    assert.strictEqual(typeExpression(id, 0, true), "number | string")
    assert.strictEqual(typeExpression(id), "string")
  })
})

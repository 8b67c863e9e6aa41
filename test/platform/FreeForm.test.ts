import { assert, describe, it } from "@effect/vitest"
import { dealSetup } from "../deals/support.ts"
import { fileServer } from "../support/FileServer.ts"
import { createCompany, request } from "../support/TestServer.ts"

const server = fileServer()

describe("free-form objects are capped at 16 KB", () => {
  it("refuses deal custom_fields over 16 KB as JSON with 422 on the field, and stores one under it", async () => {
    const company = await createCompany(server)
    const { contact } = await dealSetup(server, company.token)
    // 16.4 KB of two-byte characters, in strings each within the 4,096 characters of a free-form string.
    const big = { a: "щ".repeat(4_000), b: "щ".repeat(4_000), c: "щ".repeat(200) }
    const refused = await request(server, "POST", "/v1/deals", { token: company.token, body: { title: "Big", contact_id: contact.id, custom_fields: big } })
    assert.strictEqual(refused.status, 422)
    assert.deepStrictEqual(refused.body.errors, { custom_fields: ["The custom fields field must be at most 16 KB as JSON."] })
    const fine = await request(server, "POST", "/v1/deals", { token: company.token, body: { title: "Fine", contact_id: contact.id, custom_fields: { notes: "ok" } } })
    assert.strictEqual(fine.status, 201, JSON.stringify(fine.body))
    const patched = await request(server, "POST", `/v1/deals/${fine.body.data.id}`, { token: company.token, body: { custom_fields: big } })
    assert.strictEqual(patched.status, 422)
    // Another company's deal is not found, whatever the body.
    const other = await createCompany(server)
    const foreign = await request(server, "POST", `/v1/deals/${fine.body.data.id}`, { token: other.token, body: { custom_fields: {} } })
    assert.strictEqual(foreign.status, 404)
  })
})

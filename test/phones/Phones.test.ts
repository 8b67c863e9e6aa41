import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import renormalise from "../../migrations/0101_phones_renormalised.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const platform = (method: string, path: string, body?: unknown) =>
  request(server, method, `/platform/v1${path}`, { token: server.platformKey, body })

const companyIn = async (country: string | null) => {
  const company = await createCompany(server)
  if (country !== null) {
    const res = await platform("PATCH", `/companies/${company.id}`, { default_country: country })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.default_country, country)
  }
  return company
}

const createContact = (token: string, phones: ReadonlyArray<string>) =>
  request(server, "POST", "/v1/contacts", { token, body: { firstName: "Pat", phones: phones.map((phone) => ({ phone })) } })

describe("phone numbers", () => {
  it("reads a national number in the company's default country", async () => {
    const us = await companyIn("US")
    const res = await createContact(us.token, ["(415) 555-0123", "+44 7911 123456"])
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.deepStrictEqual(res.body.data.phones.map((p: { phone: string }) => p.phone), ["+14155550123", "+447911123456"])

    const updated = await request(server, "PATCH", `/v1/contacts/${res.body.data.id}`, {
      token: us.token,
      body: { phones: [{ phone: "415.555.0199" }] }
    })
    assert.strictEqual(updated.status, 200, JSON.stringify(updated.body))
    assert.deepStrictEqual(updated.body.data.phones.map((p: { phone: string }) => p.phone), ["+14155550199"])

    // Another company's contact is not found, whatever its phones.
    const other = await companyIn("US")
    const foreign = await request(server, "GET", `/v1/contacts/${res.body.data.id}`, { token: other.token })
    assert.strictEqual(foreign.status, 404)
  })

  it("refuses invalid numbers, and national ones without a default country, with the 422 shape", async () => {
    const bare = await companyIn(null)
    const national = await createContact(bare.token, ["(415) 555-0123"])
    assert.strictEqual(national.status, 422)
    assert.deepStrictEqual(Object.keys(national.body.errors), ["phones.0.phone"])
    assert.match(national.body.errors["phones.0.phone"][0], /country code/)

    const us = await companyIn("US")
    const invalid = await createContact(us.token, ["+14155550123", "+1 000 000 0000"])
    assert.strictEqual(invalid.status, 422)
    assert.deepStrictEqual(Object.keys(invalid.body.errors), ["phones.1.phone"])
    const swiss = await createContact(bare.token, ["+4155550123"])
    assert.strictEqual(swiss.status, 422)
  })

  it("refuses a default_country that is not ISO 3166-1 alpha-2", async () => {
    const company = await createCompany(server)
    for (const bad of ["us", "USA", "XX"]) {
      const res = await platform("PATCH", `/companies/${company.id}`, { default_country: bad })
      assert.strictEqual(res.status, 422, bad)
      assert.deepStrictEqual(Object.keys(res.body.errors), ["default_country"])
    }
  })

  it("normalises the profile phone and the number of an external call the same way", async () => {
    const kz = await companyIn("KZ")
    const me = await request(server, "POST", "/v1/me", { token: kz.token, body: { phone: "8 701 123 4567" } })
    assert.strictEqual(me.status, 200, JSON.stringify(me.body))
    assert.strictEqual(me.body.data.phone, "+77011234567")
    const bad = await request(server, "POST", "/v1/me", { token: kz.token, body: { phone: "+1 000 000 0000" } })
    assert.strictEqual(bad.status, 422)
    assert.deepStrictEqual(Object.keys(bad.body.errors), ["phone"])
  })

  it("the migration re-reads stored numbers and keeps (and lists) what does not parse", async () => {
    const us = await companyIn("US")
    const created = await createContact(us.token, ["+14155550123"])
    const contactId = created.body.data.id as number
    const rows = await query<{ id: number }>(server,
      `INSERT INTO contact_phones (company_id, contact_id, phone, position) VALUES ($1, $2, '(415) 555-0142', 1), ($1, $2, 'call me maybe', 2) RETURNING id`,
      [us.id, contactId])
    await server.runInApp(renormalise)
    const after = await query<{ id: string; phone: string }>(server, "SELECT id, phone FROM contact_phones WHERE contact_id = $1 ORDER BY position", [contactId])
    assert.deepStrictEqual(after.map((r) => r.phone), ["+14155550123", "+14155550142", "call me maybe"])
    assert.strictEqual(rows.length, 2)
  })
})

import { assert, describe, it } from "@effect/vitest"
import { request as httpRequest } from "node:http"
import { afterAll, beforeAll } from "vitest"
import { maxFieldLength, maxFreeTextLength } from "../../src/platform/InputHygiene.ts"
import { dealSetup } from "../deals/support.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer({ maxBodyBytes: 64 * 1024 })
})
afterAll(() => server?.close())

/** Exact bytes over a plain socket, reporting a reset instead of throwing it. */
const raw = (method: string, path: string, headers: Record<string, string>, body?: Buffer) =>
  new Promise<{ status: number; text: string } | { reset: string }>((resolve) => {
    const url = new URL(server.url)
    const req = httpRequest({ host: url.hostname, port: url.port, path, method, headers, agent: false }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }))
      res.on("error", (e) => resolve({ reset: String(e) }))
    })
    req.on("error", (e) => resolve({ reset: String(e) }))
    if (body !== undefined) req.write(body)
    req.end()
  })

const jsonMessage = (res: { status: number; text: string } | { reset: string }) => {
  assert.ok(!("reset" in res), JSON.stringify(res))
  const body = JSON.parse((res as { text: string }).text)
  assert.strictEqual(typeof body.message, "string")
  return { status: (res as { status: number }).status, body }
}

describe("keys named like Object.prototype members", () => {
  it("are plain keys: stored and read back in a free-form map, refused by name where the contract has no such field", async () => {
    const company = await createCompany(server)
    const { contact } = await dealSetup(server, company.token)
    const custom_fields = { toString: "a", valueOf: "b", constructor: "c", hasOwnProperty: "d" }
    const created = await request(server, "POST", "/v1/deals", {
      token: company.token,
      raw: JSON.stringify({ title: "Proto", contact_id: contact.id, custom_fields }).replace('"custom_fields":{', '"custom_fields":{"__proto__":"e",')
    })
    assert.strictEqual(created.status, 201, JSON.stringify(created.body))
    const read = await request(server, "GET", `/v1/deals/${created.body.data.id}`, { token: company.token })
    for (const key of ["toString", "valueOf", "constructor", "hasOwnProperty", "__proto__"]) {
      assert.isTrue(Object.hasOwn(read.body.data.custom_fields, key), key)
    }
    assert.strictEqual(read.body.data.custom_fields.toString, "a")
    for (const key of ["toString", "valueOf", "constructor", "__proto__"]) {
      const res = await request(server, "PUT", "/v1/me/notification-preferences", { token: company.token, raw: `{"${key}": {"a": 1}}` })
      assert.strictEqual(res.status, 422, `${key}: ${JSON.stringify(res.body)}`)
      assert.isTrue(Object.hasOwn(res.body.errors, key), JSON.stringify(res.body))
    }
  })
})

describe("strings", () => {
  it("refuses a lone surrogate with 422 on the field, in a typed field and in a free-form map", async () => {
    const company = await createCompany(server)
    const tag = await request(server, "POST", "/v1/tags", { token: company.token, raw: '{"name":"a\\ud800b"}' })
    assert.strictEqual(tag.status, 422)
    assert.deepStrictEqual(tag.body.errors, { name: ["The name field must be valid Unicode text."] })
    const deal = await request(server, "POST", "/v1/deals", { token: company.token, raw: '{"title":"x","custom_fields":{"k":"\\udc00"}}' })
    assert.strictEqual(deal.status, 422)
    assert.deepStrictEqual(Object.keys(deal.body.errors), ["custom_fields.k"])
    const pair = await request(server, "POST", "/v1/tags", { token: company.token, raw: '{"name":"\\ud83d\\ude00 ok"}' })
    assert.strictEqual(pair.status, 201, "a surrogate pair is one character")
  })

  it("holds a field without a declared maximum to the default, and free-form text to its own", async () => {
    const company = await createCompany(server)
    const label = await request(server, "PUT", "/v1/me/notification-preferences", {
      token: company.token,
      body: { categories: { billing: { enabled: true, label: "x".repeat(maxFieldLength + 1) } } }
    })
    assert.strictEqual(label.status, 422)
    assert.deepStrictEqual(label.body.errors, {
      "categories.billing.label": [`The categories.billing.label field must not be greater than ${maxFieldLength} characters.`]
    })
    const fits = await request(server, "PUT", "/v1/me/notification-preferences", {
      token: company.token,
      body: { categories: { billing: { enabled: true, label: "x".repeat(maxFieldLength) } } }
    })
    assert.strictEqual(fits.status, 200, JSON.stringify(fits.body))
    const free = await request(server, "POST", "/v1/deals", {
      token: company.token,
      body: { title: "x", custom_fields: { notes: "y".repeat(maxFreeTextLength + 1) } }
    })
    assert.strictEqual(free.status, 422)
    assert.deepStrictEqual(Object.keys(free.body.errors), ["custom_fields.notes"])
  })
})

describe("ids", () => {
  it("refuses non-positive, fractional and inexact ids with 422 on the field, and writes nothing", async () => {
    const company = await createCompany(server)
    for (const id of ["-1", "0", "1.5", "9007199254740993"]) {
      const res = await request(server, "POST", "/v1/segments", { token: company.token, raw: `{"name":"s","type":"static","contact_ids":[${id}]}` })
      assert.strictEqual(res.status, 422, id)
      assert.deepStrictEqual(res.body.errors, { "contact_ids.0": ["The selected contact ids.0 is invalid."] }, id)
    }
    const deal = await request(server, "POST", "/v1/deals", { token: company.token, raw: '{"contact_id":9007199254740992,"funnel_id":-4}' })
    assert.strictEqual(deal.status, 422)
    assert.includeMembers(Object.keys(deal.body.errors), ["contact_id", "funnel_id"])
    const list = await request(server, "GET", "/v1/segments", { token: company.token })
    assert.strictEqual(list.body.data.items.length, 0)
    const own = await request(server, "POST", "/v1/deals", { token: company.token, body: { title: "x", custom_fields: { legacy_id: 0, old_ids: [-1] } } })
    assert.notProperty(own.body.errors ?? {}, "custom_fields.legacy_id", "an id-like key in a free-form object is the client's own data")
    assert.notProperty(own.body.errors ?? {}, "custom_fields.old_ids.0")
  })
})

describe("unique values written at once", () => {
  it("gives 10 segments created in parallel with one name 10 answers of 201 and 10 slugs", async () => {
    const company = await createCompany(server)
    const answers = await Promise.all(Array.from({ length: 10 }, () =>
      request(server, "POST", "/v1/segments", { token: company.token, body: { name: "Same Name", type: "static" } })))
    assert.deepStrictEqual(answers.map((a) => a.status), Array(10).fill(201), JSON.stringify(answers.find((a) => a.status !== 201)?.body))
    const slugs = new Set(answers.map((a) => a.body.data.slug))
    assert.strictEqual(slugs.size, 10)
    assert.isTrue(slugs.has("same-name"))
    const other = await createCompany(server)
    const theirs = await request(server, "POST", "/v1/segments", { token: other.token, body: { name: "Same Name", type: "static" } })
    assert.strictEqual(theirs.body.data.slug, "same-name", "slugs are per company")
    const foreign = await request(server, "PATCH", `/v1/segments/${answers[0].body.data.id}`, { token: other.token, body: { name: "Theirs" } })
    assert.strictEqual(foreign.status, 404)
  })
})

describe("refusals outside the API's own handlers are JSON", () => {
  it("answers a too-large provider hook body with 413 {message}", async () => {
    const big = Buffer.alloc(200 * 1024, "a")
    for (const path of ["/hooks/telegram/1", "/hooks/whatsapp/1"]) {
      const res = jsonMessage(await raw("POST", path, { "content-type": "application/json", "content-length": String(big.length) }, big))
      assert.strictEqual(res.status, 413, path)
    }
  })

  it("answers a too-large API body with 413 {message}, a wrong content type with 415 {message}", async () => {
    const company = await createCompany(server)
    const big = Buffer.from(JSON.stringify({ name: "x".repeat(100 * 1024) }))
    const large = jsonMessage(await raw("POST", "/v1/tags", { authorization: `Bearer ${company.token}`, "content-type": "application/json" }, big))
    assert.strictEqual(large.status, 413)
    const xml = jsonMessage(await raw("POST", "/v1/tags", { authorization: `Bearer ${company.token}`, "content-type": "application/xml" }, Buffer.from("<a/>")))
    assert.strictEqual(xml.status, 415)
  })

  it("answers signed file routes with JSON refusals, whatever the method, body or range", async () => {
    const paths = ["/v1/messages/1/attachments/1/media?c=1&signature=x", "/v1/exports/1/file?c=1&signature=x", "/v1/stickers/1/file?signature=x"]
    for (const path of paths) {
      for (const [method, body] of [["GET", undefined], ["HEAD", undefined], ["GET", Buffer.alloc(200 * 1024, "a")], ["POST", Buffer.from("{}")]] as const) {
        const res = await raw(method, path, { range: "bytes=99999999999999999999-", "content-type": "application/json" }, body)
        assert.ok(!("reset" in res), `${method} ${path}: ${JSON.stringify(res)}`)
        if (method === "HEAD") continue
        const answer = jsonMessage(res)
        assert.include([403, 404, 405, 413], answer.status, `${method} ${path}`)
      }
    }
  })
})

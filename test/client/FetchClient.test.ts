import { assert, describe, it } from "@effect/vitest"
import { OpenApi } from "effect/http-api"
import { readFileSync } from "node:fs"
import { afterAll, beforeAll } from "vitest"
import { generate, type Document } from "../../scripts/client/Generate.ts"
import { Api } from "../../src/Api.ts"
import { ApiError, makeClient, unwrap } from "../../src/client/fetch/Client.ts"
import { unique } from "../support/Ids.ts"
import { type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const newCompany = async () => {
  const platform = makeClient({ baseUrl: server.url, token: server.platformKey })
  const created = await platform.platform.createCompany({
    payload: { name: `Fetch ${unique()}`, plan: "business", admin: { email: `a-${unique()}@example.test`, password: "password-123", name: "Ann" } }
  })
  const { company, token } = unwrap(created).data
  return { id: company.id, client: makeClient({ baseUrl: server.url, token }) }
}

describe("the fetch client generated from /openapi.json", () => {
  it("is what the generator writes from the contract and from the served /openapi.json (run npm run client:generate when this fails)", async () => {
    const committed = readFileSync(new URL("../../src/client/fetch/Client.ts", import.meta.url), "utf8")
    const served = (await (await fetch(`${server.url}/openapi.json`)).json()) as Document
    assert.strictEqual(committed === generate(OpenApi.fromApi(Api) as unknown as Document), true)
    assert.strictEqual(committed === generate(served), true)
  })

  it("creates, lists and reads with typed answers; another company's record is a 404 with the documented body", async () => {
    const a = await newCompany()
    const b = await newCompany()
    const created = await a.client.tags.create({ payload: { name: "vip" } })
    assert.strictEqual(created.status, 201)
    const tag = unwrap(created).data
    const listed = unwrap(await a.client.tags.list())
    assert.deepStrictEqual(listed.data.map((t) => t.name), ["vip"])
    const mine = await a.client.tags.get({ params: { tag: tag.id } })
    assert.strictEqual(mine.ok && mine.data.data.company_id, a.id)
    const foreign = await b.client.tags.get({ params: { tag: tag.id } })
    assert.strictEqual(foreign.status, 404)
    assert.strictEqual(!foreign.ok && typeof foreign.error.message, "string")
    const thrown = await b.client.tags.get({ params: { tag: tag.id } }).then(unwrap).then(() => undefined, (e: unknown) => e)
    assert.instanceOf(thrown, ApiError)
    assert.strictEqual((thrown as ApiError).status, 404)
  })

  it("answers a refused body with its field errors, and sends query arrays and the idempotency header", async () => {
    const a = await newCompany()
    const refused = await a.client.tags.create({ payload: { name: "" } })
    assert.strictEqual(refused.status, 422)
    if (refused.status === 422) assert.deepStrictEqual(Object.keys(refused.error.errors ?? {}), ["name"])
    await a.client.contacts.create({ payload: { firstName: "Ann", status: "active", phones: [{ phone: "+14155550123" }] } }).then(unwrap)
    await a.client.contacts.create({ payload: { firstName: "Bob", status: "inactive", phones: [{ phone: "+14155550124" }] } }).then(unwrap)
    const active = unwrap(await a.client.contacts.list({ query: { "statuses[]": ["active"], perPage: 10 } }))
    assert.deepStrictEqual(active.data.items.map((c) => c.firstName), ["Ann"])
    const channel = unwrap(await a.client.channels.create({ payload: { type: "msgr_a", provider: "sandbox", name: "Support" } })).data
    const send = (key: string) =>
      a.client.messages.send({
        headers: { "idempotency-key": key },
        payload: { channel_id: channel.id, to: { phone: "+14155550125" }, text: "Hello" }
      }).then(unwrap)
    const key = `key-${unique()}`
    const first = await send(key)
    const replay = await send(key)
    const other = await send(`key-${unique()}`)
    assert.strictEqual(replay.data.id, first.data.id)
    assert.notStrictEqual(other.data.id, first.data.id)
  })

  it("uploads multipart form data and downloads a file as a Blob", async () => {
    const a = await newCompany()
    const form = new FormData()
    form.append("file", new Blob([new TextEncoder().encode("%PDF-1.4")], { type: "application/pdf" }), "a.pdf")
    const uploaded = unwrap(await a.client.uploads.upload({ payload: form }))
    assert.deepStrictEqual([uploaded.type, uploaded.file_name], ["document", "a.pdf"])
    await a.client.contacts.create({ payload: { firstName: "Cleo", phones: [{ phone: "+14155550126" }] } }).then(unwrap)
    const started = unwrap(await a.client.exports.create({ payload: { type: "contacts", format: "csv" } })).data.export
    let status = started.status
    for (let i = 0; i < 150 && status !== "completed" && status !== "failed"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 200))
      status = unwrap(await a.client.exports.get({ params: { export: started.id } })).data.export.status
    }
    assert.strictEqual(status, "completed")
    const file = unwrap(await a.client.exports.download({ params: { export: started.id } }))
    assert.instanceOf(file, Blob)
    assert.include(await file.text(), "Cleo")
  })
})

import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { createContact } from "../contacts/support.ts"
import { conversationOn } from "../messages/support.ts"
import { createPack, listPacks } from "../stickers/support.ts"
import { createCompany, request, startServer, type RunningServer } from "../support/TestServer.ts"

let server: RunningServer
let spec: any
beforeAll(async () => {
  server = await startServer()
  spec = (await request(server, "GET", "/openapi.json")).body
})
afterAll(() => server?.close())

const garbageBodies = [
  "{not json",
  "[]",
  "null",
  "12345",
  JSON.stringify({ name: { $ne: 1 }, email: ["x"], password: 7, device_name: null, socket_id: {}, code: 123456 }),
  JSON.stringify(Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`k${i}`, "x".repeat(50)])))
]

const fill = (path: string, value: string) => path.replace(/\{[^}]+\}/g, value)

describe("every endpoint answers garbage with a 4xx JSON body, never a 500", () => {
  it("covers the whole OpenAPI document with a tenant token and with the platform key", async () => {
    const company = await createCompany(server)
    const operations = Object.entries(spec.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
      Object.entries(item).filter(([m]) => ["get", "post", "put", "patch", "delete"].includes(m)).map(([method, op]) => ({
        path,
        method: method.toUpperCase(),
        hasBody: op.requestBody !== undefined
      }))
    )
    assert.ok(operations.length >= 5, `operations in the document: ${operations.length}`)
    const failures: Array<string> = []
    // The key rotation would replace the platform key the other tests use (test/platform-admin/Cli.test.ts covers it).
    for (const op of operations.filter((o) => !o.path.endsWith("/key/rotate"))) {
      const token = op.path.startsWith("/platform/") ? server.platformKey : company.token
      for (const id of ["999999999", "abc", "-1", "1.5", "%27%22"]) {
        const path = fill(op.path, id)
        const bodies = op.hasBody || op.method !== "GET" ? garbageBodies : [undefined]
        for (const raw of bodies) {
          const res = await request(server, op.method, path, raw === undefined ? { token } : { token, raw })
          const label = `${op.method} ${path} ${raw?.slice(0, 20) ?? ""} -> ${res.status}`
          if (res.status >= 500) failures.push(label)
          else if (res.status >= 400 && (typeof res.body !== "object" || typeof res.body?.message !== "string")) {
            failures.push(`${label} (body ${JSON.stringify(res.body)?.slice(0, 80)})`)
          } else if (op.hasBody && res.status < 400 && !(raw ?? "").startsWith("{")) {
            // A JSON object of unknown keys is a valid no-op for all-optional bodies; anything else is not.
            failures.push(`${label} (accepted garbage)`)
          }
        }
      }
    }
    assert.deepStrictEqual(failures, [])
  }, 180_000) // thousands of sequential requests: every operation × five ids × every garbage body

  it("answers 401 JSON to every tenant endpoint without credentials, and other companies stay invisible", async () => {
    const failures: Array<string> = []
    for (const [path, item] of Object.entries(spec.paths as Record<string, Record<string, any>>)) {
      if (!path.startsWith("/v1/") || path.startsWith("/v1/auth/mobile/login") || path === "/v1/auth/login") continue
      for (const method of Object.keys(item).filter((m) => ["get", "post", "put", "patch", "delete"].includes(m))) {
        if ((item[method].security ?? spec.security ?? []).length === 0) continue
        const res = await request(server, method.toUpperCase(), fill(path, "1"))
        if (res.status !== 401 || res.body?.message !== "Unauthenticated.") failures.push(`${method} ${path} -> ${res.status}`)
      }
    }
    assert.deepStrictEqual(failures, [])
  })

  it("answers 404 to another company's ids on every route of its records, never 403 or 500, and changes nothing", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const contact = await createContact(server, a.token, { firstName: "Owned", lastName: "ByA" })
    const tag = await request(server, "POST", "/v1/tags", { token: a.token, body: { name: "owned-by-a" } })
    assert.strictEqual(tag.status, 201, JSON.stringify(tag.body))
    const pack = await createPack(server, a.token)
    const team = await request(server, "POST", "/v1/teams", { token: a.token, body: { name: "Team of A" } })
    assert.strictEqual(team.status, 201, JSON.stringify(team.body))
    // A record of A for each collection: a route under it with one path parameter gets its id.
    const owned: Record<string, number> = {
      "/v1/channels/": c.channelId,
      "/v1/contacts/": contact.id,
      "/v1/conversations/": c.conversationId,
      "/v1/messages/": c.inboundId,
      "/v1/sticker-packs/": pack.id,
      "/v1/tags/": tag.body.data.id,
      "/v1/teams/": team.body.data.team.id
    }
    // The sample: bearer routes whose body has no required field, so the id is all there is to judge.
    const sample = Object.entries(spec.paths as Record<string, Record<string, any>>).flatMap(([path, item]) => {
      const collection = Object.keys(owned).find((prefix) => path.startsWith(`${prefix}{`))
      if (collection === undefined || path.split("{").length !== 2) return []
      return Object.entries(item)
        .filter(([method, op]) =>
          ["get", "post", "put", "patch", "delete"].includes(method) &&
          (op.security ?? spec.security ?? []).length > 0 &&
          (op.requestBody?.content?.["application/json"]?.schema?.required ?? []).length === 0 &&
          op.requestBody?.content?.["multipart/form-data"] === undefined
        )
        .map(([method]) => ({ method: method.toUpperCase(), path: fill(path, String(owned[collection])) }))
    })
    assert.ok(sample.length >= 25, `routes sampled: ${sample.length}`)
    const failures: Array<string> = []
    for (const op of sample) {
      const res = await request(server, op.method, op.path, op.method === "GET" || op.method === "DELETE" ? { token: b.token } : { token: b.token, body: {} })
      if (res.status !== 404 || typeof res.body?.message !== "string") failures.push(`${op.method} ${op.path} -> ${res.status} ${JSON.stringify(res.body)?.slice(0, 80)}`)
    }
    assert.deepStrictEqual(failures, [])
    for (const [collection, id] of Object.entries(owned).filter(([collection]) => collection !== "/v1/sticker-packs/")) {
      assert.strictEqual((await request(server, "GET", `${collection}${id}`, { token: a.token })).status, 200, `${collection}${id} after the sweep`)
    }
    assert.ok((await listPacks(server, a.token)).some((p) => p.id === pack.id))
  })
})

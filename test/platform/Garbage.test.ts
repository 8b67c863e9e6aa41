import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { createCompany, request, startServer, type TestServer } from "../support/TestServer.ts"

let server: TestServer
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
    for (const op of operations) {
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
  })

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
})

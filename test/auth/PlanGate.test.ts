import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { requiredPlan } from "../../src/auth/Plans.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
let gated: ReadonlyArray<{ readonly method: string; readonly path: string; readonly feature: string; readonly body: boolean }>
let all: ReadonlyArray<{ readonly method: string; readonly path: string }>

beforeAll(async () => {
  server = await startServer()
  const doc = (await request(server, "GET", "/openapi.json")).body
  const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
    Object.entries(item).map(([method, operation]) => ({ method: method.toUpperCase(), path, operation }))
  )
  all = operations
  gated = operations.flatMap(({ method, path, operation }) =>
    operation["x-required-feature"] === undefined
      ? []
      : [{ method, path, feature: operation["x-required-feature"] as string, body: operation.requestBody !== undefined }]
  )
})
afterAll(() => server?.close())

/** Path parameters that are not even integers: a gate that decoded them first would answer 422 or 404. */
const malformedPath = (path: string) => path.replace(/\{[^}]+\}/g, "not-a-number")
/** Query values of the wrong type for every list (`perPage`, `page`, flags). */
const malformedQuery = "?perPage=many&page=-1&sortDir=sideways&overdue=maybe"
const malformedBodies: ReadonlyArray<{ readonly body?: unknown; readonly raw?: string }> = [
  { body: {} },
  { body: { contact_id: "x", title: [1], name: { a: 1 }, type: 7, format: false } },
  { body: [] },
  { body: null }
]

const expected = (feature: string) => ({
  message: `Your plan does not include the ${feature} feature.`,
  error: "feature_not_available",
  feature,
  required_plan: requiredPlan(feature as never)
})

describe("plan gates before bodies", () => {
  it("the document marks every route of the gated areas, and only those", () => {
    const gatedAreas = [
      /^\/v1\/(deals|deal-tasks|funnels|deal-types|lost-reasons)(\/|$)/,
      /^\/v1\/company\/deal-settings$/,
      /^\/v1\/contacts\/\{[^}]+\}\/deals$/,
      /^\/v1\/broadcasts(\/|$)/,
      /^\/v1\/exports(\/\{[^}]+\})?(\/download)?$/,
      /^\/v1\/api-tokens(\/|$)/
    ]
    // Revoking stays open to a company that lost the api feature (its tokens must be removable).
    const open = new Set(["DELETE /v1/api-tokens/{id}"])
    const inArea = all.filter(({ path }) => gatedAreas.some((area) => area.test(path)))
      .map(({ method, path }) => `${method} ${path}`)
      .filter((key) => !open.has(key))
    assert.deepStrictEqual(gated.map(({ method, path }) => `${method} ${path}`).sort(), inArea.sort())
    assert.deepStrictEqual([...new Set(gated.map((g) => g.feature))].sort(), ["api", "broadcasts", "deals", "exports"])
    assert.isAtLeast(gated.length, 40)
    assert.isTrue(gated.some((g) => g.method === "POST" && g.path === "/v1/deals"))
    assert.isTrue(gated.some((g) => g.method === "POST" && g.path === "/v1/deal-tasks"))
  })

  it("on a plan without the feature, every gated route answers 403 feature_not_available whatever the request", async () => {
    const free = await createCompany(server, { plan: "free" })
    for (const route of gated) {
      const path = malformedPath(route.path) + malformedQuery
      const attempts = route.body ? malformedBodies : [{}]
      for (const attempt of attempts) {
        const res = await request(server, route.method, path, { token: free.token, ...attempt })
        assert.deepStrictEqual([res.status, res.body], [403, expected(route.feature)], `${route.method} ${route.path} ${JSON.stringify(attempt)}`)
      }
      if (route.body) {
        const raw = await request(server, route.method, path, { token: free.token, raw: "{\"not\": json" })
        // Unparseable JSON is the kernel's 400 before any route; anything else is the gate's.
        assert.include([400, 403], raw.status, `${route.method} ${route.path} raw`)
      }
    }
  })

  it("with the feature the same requests reach validation (so the walk above proves the order)", async () => {
    const business = await createCompany(server)
    for (const [method, path] of [["POST", "/v1/deals"], ["POST", "/v1/deal-tasks"], ["POST", "/v1/broadcasts"], ["POST", "/v1/exports"], ["POST", "/v1/api-tokens"]]) {
      const res = await request(server, method, path, { token: business.token, body: {} })
      assert.strictEqual(res.status, 422, `${method} ${path} ${JSON.stringify(res.body)}`)
    }
    const free = await createCompany(server, { plan: "free" })
    const before = await request(server, "POST", "/v1/deals", { token: free.token, body: {} })
    assert.deepStrictEqual([before.status, before.body.error], [403, "feature_not_available"])
  })

  it("still asks for credentials first, and a gated record of another company is 403 on a free plan, 404 with the feature", async () => {
    const anonymous = await request(server, "POST", "/v1/deals", { body: {} })
    assert.strictEqual(anonymous.status, 401)
    const owner = await createCompany(server)
    const funnel = await request(server, "POST", "/v1/funnels", { token: owner.token, body: { name: "Sales" } })
    assert.strictEqual(funnel.status, 201, JSON.stringify(funnel.body))
    const free = await createCompany(server, { plan: "free" })
    const business = await createCompany(server)
    const path = `/v1/funnels/${funnel.body.data.id}`
    assert.strictEqual((await request(server, "GET", path, { token: free.token })).status, 403)
    assert.strictEqual((await request(server, "GET", path, { token: business.token })).status, 404)
    assert.strictEqual((await request(server, "GET", path, { token: owner.token })).status, 200)
  })
})

import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { afterAll, beforeAll } from "vitest"
import { makeFetchClient } from "../../src/client/EffectClient.ts"
import { NotFound } from "../../src/platform/Errors.ts"
import { createCompany, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

describe("the typed client derived from the contract", () => {
  it("creates and reads through the API with decoded answers; another company's record is a typed NotFound", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const result = await Effect.runPromise(Effect.gen(function*() {
      const mine = yield* makeFetchClient(server.url, a.token)
      const theirs = yield* makeFetchClient(server.url, b.token)
      const created = yield* mine.tags.create({ payload: { name: "vip" } })
      const listed = yield* mine.tags.list()
      const foreign = yield* theirs.tags.get({ params: { tag: created.data.id } }).pipe(Effect.flip)
      const me = yield* mine.me.get()
      return { created, listed, foreign, me }
    }))
    assert.strictEqual(result.created.data.name, "vip")
    assert.deepStrictEqual(result.listed.data.map((t) => t.name), ["vip"])
    assert.instanceOf(result.foreign, NotFound, String(result.foreign))
    assert.strictEqual(result.me.data.current_company_id, a.id)
  })
})

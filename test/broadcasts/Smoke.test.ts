import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { audience, broadcastBody, createChannel, queryOf, recipientsOf, waitFor } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

describe("smoke", () => {
  it("sends", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(queryOf(server), a.id)
    const { segmentId } = await audience(server, queryOf(server), a, 5)
    const res = await request(server, "POST", "/v1/broadcasts", { token: a.token, body: broadcastBody(segmentId, [channel]) })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    const done = await waitFor(server, a.token, res.body.data.id, (b) => b.status === "completed")
    console.log(JSON.stringify(done, null, 1))
    console.log(await recipientsOf(queryOf(server), res.body.data.id))
  })
})

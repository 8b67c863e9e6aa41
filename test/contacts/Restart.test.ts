import { assert, describe, it } from "@effect/vitest"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { createContact } from "./support.ts"

// PostgreSQL mode restarts against the same DATABASE_URL; embedded mode against the same PGlite directory.
const dataDir = process.env.DATABASE_URL ? undefined : mkdtempSync(join(tmpdir(), "crm-restart-"))
const start = () => startServer(dataDir === undefined ? {} : { dataDir })

let running: RunningServer | undefined
afterAll(async () => {
  await running?.close()
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true })
})

describe("block throttles across a restart", () => {
  it("still answers 429 after the service restarts, with every contact's earlier changes counted", async () => {
    running = await start()
    const company = await createCompany(running)
    const contact = await createContact(running, company.token, { firstName: "Flappy" })
    const calm = await createContact(running, company.token, { firstName: "Calm" })
    const change = (server: RunningServer, id: number, action: "block" | "unblock") =>
      request(server, "POST", `/v1/contacts/${id}/${action}`, { token: company.token })
    for (let i = 0; i < 3; i++) {
      assert.strictEqual((await change(running, contact.id, "block")).status, 200)
      assert.strictEqual((await change(running, contact.id, "unblock")).status, 200)
    }
    const before = await change(running, contact.id, "block")
    assert.strictEqual(before.status, 429)
    assert.strictEqual((await change(running, calm.id, "block")).status, 200)

    await running.close()
    running = undefined
    running = await start()

    const after = await change(running, contact.id, "block")
    assert.strictEqual(after.status, 429, JSON.stringify(after.body))
    assert.ok(after.body.retry_after <= before.body.retry_after, `${after.body.retry_after} > ${before.body.retry_after}`)
    assert.strictEqual(after.headers.get("retry-after"), String(after.body.retry_after))
    // The calm contact's one change was remembered too: five more fit, the sixth does not.
    for (let i = 0; i < 5; i++) {
      assert.strictEqual((await change(running, calm.id, i % 2 === 0 ? "unblock" : "block")).status, 200, `change ${i}`)
    }
    assert.strictEqual((await change(running, calm.id, "block")).status, 429)

    const stranger = await createCompany(running)
    const foreign = await request(running, "POST", `/v1/contacts/${calm.id}/unblock`, { token: stranger.token })
    assert.deepStrictEqual([foreign.status, foreign.body], [404, { message: "Contact not found." }])
  })
})

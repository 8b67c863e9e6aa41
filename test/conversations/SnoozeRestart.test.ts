import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { conversationOn } from "../messages/support.ts"
import { payloadsOf } from "../support/Sql.ts"
import { createCompany, startServer } from "../support/TestServer.ts"
import { act, conversation, eventually } from "./support.ts"

/**
 * A restart needs a database that outlives a server: a private embedded one in a directory of its
 * own (in both test modes), so that no other server's sweep reopens the conversation in between.
 */
const dirs: Array<string> = []
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true })
})

describe("the snooze timer across a restart", () => {
  it("reopens at the next start a conversation whose snooze came due while no server ran", async () => {
    const dir = await mkdtemp(join(tmpdir(), "crm-snooze-"))
    dirs.push(dir)
    const open = () => startServer({ databaseUrl: Option.none(), dataDir: dir, cluster: "single" })
    let server = await open()
    const a = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const until = new Date(Date.now() + 3_000)
    const snoozed = await act(server, a.token, c.conversationId, "status", { status: "snoozed", snoozed_until: until.toISOString() })
    assert.strictEqual(snoozed.status, 200)
    await server.close()
    // Down past the snooze's end: nothing ran to reopen it.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, until.getTime() - Date.now()) + 500))
    server = await open()
    try {
      const reopened = await eventually(async () => {
        const data = await conversation(server, a.token, c.conversationId)
        return data.status === "open" ? data : undefined
      }, 20_000)
      assert.strictEqual(reopened.snoozed_until, null)
      const changes = await payloadsOf(server, a.id, "conversation.status_changed")
      assert.deepStrictEqual(changes.map((p: any) => [p.from, p.to, p.reason]), [["open", "snoozed", "user"], ["snoozed", "open", "snooze_expired"]])
    } finally {
      await server.close()
    }
  }, 600_000)
})

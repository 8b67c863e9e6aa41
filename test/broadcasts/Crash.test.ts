import { assert, describe, it } from "@effect/vitest"
import { afterAll } from "vitest"
import { type ServerProcess, spawnServer } from "../support/Processes.ts"
import { createCompany, request, type TestServer } from "../support/TestServer.ts"
import { audience, broadcastBody, createChannel, pgQuery, recipientsOf, sleep, waitFor } from "./support.ts"

const platformKey = `broadcasts-platform-key-${Math.random().toString(36).slice(2)}`
const asTestServer = (p: ServerProcess): TestServer => ({ url: p.url, platformKey, close: async () => {} })

describe.runIf(process.env.DATABASE_URL)("a broadcast run across a kill -9 of its server", () => {
  const processes: Array<ServerProcess> = []
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop(2_000)))
  }, 30_000)

  it("ends every recipient in exactly one final status and sends none twice", async () => {
    const db = pgQuery(process.env.DATABASE_URL!)
    // 100 sends per second per channel: the run of 400 takes about 4 s, long enough to die in the middle.
    const env = { CLUSTER: "single", PLATFORM_API_KEY: platformKey, SANDBOX_SENDS_PER_SECOND: "100" }
    const first = await spawnServer("broadcasts-1", env, { readyTimeoutMs: 90_000 })
    processes.push(first)
    const company = await createCompany(asTestServer(first))
    const channel = await createChannel(db, company.id)
    const { segmentId, contactIds } = await audience(asTestServer(first), db, company, 400)
    const created = await request(asTestServer(first), "POST", "/v1/broadcasts", {
      token: company.token,
      body: broadcastBody(segmentId, [channel])
    })
    assert.strictEqual(created.status, 201, JSON.stringify(created.body))
    const id = created.body.data.id as number

    const deadline = Date.now() + 30_000
    while (true) {
      const [{ done }] = await db("SELECT count(*)::int AS done FROM broadcast_recipients WHERE broadcast_id = $1 AND status <> 'pending'", [id])
      if (done >= 60) break
      if (Date.now() > deadline) throw new Error(`the run did not start: ${first.output()}`)
      await sleep(50)
    }
    process.kill(first.pid!, "SIGKILL")
    await first.stop(1_000)
    const [{ left }] = await db("SELECT count(*)::int AS left FROM broadcast_recipients WHERE broadcast_id = $1 AND status = 'pending'", [id])
    assert.isAbove(left, 0, "the kill came after the run had ended")

    const second = await spawnServer("broadcasts-2", env, { readyTimeoutMs: 90_000 })
    processes.push(second)
    const finished = await waitFor(asTestServer(second), company.token, id, (b) => b.status === "completed", 90_000)
    assert.strictEqual(finished.runs.length, 1)

    const recipients = await recipientsOf(db, id)
    assert.strictEqual(recipients.length, contactIds.length)
    for (const r of recipients) assert.include(["sent", "failed"], r.status, `recipient ${r.id}`)
    const unknown = recipients.filter((r) => r.status === "failed")
    for (const r of unknown) assert.strictEqual(r.error_message, "outcome_unknown")
    // Only sends claimed for a provider call at the kill can be unknown: at 100/s one batch of at most 64.
    assert.isAtMost(unknown.length, 64)

    // The provider got each recipient at most once: one message per recipient, and one per sent recipient.
    const perRecipient = await db(
      `SELECT (metadata->>'broadcast_recipient_id')::bigint AS recipient, count(*)::int AS messages,
         count(*) FILTER (WHERE external_message_id IS NOT NULL)::int AS accepted
       FROM messages WHERE company_id = $1 AND direction = 'outbound' AND metadata->>'broadcast_id' = $2
       GROUP BY 1`,
      [company.id, String(id)]
    )
    const byRecipient = new Map(perRecipient.map((row) => [Number(row.recipient), row]))
    for (const row of perRecipient) assert.strictEqual(row.messages, 1, `recipient ${row.recipient} got ${row.messages} messages`)
    for (const r of recipients.filter((r) => r.status === "sent")) {
      assert.strictEqual(byRecipient.get(Number(r.id))?.accepted, 1, `sent recipient ${r.id}`)
    }

    // retry-failed resends the unknown ones, on request only.
    if (unknown.length > 0) {
      const retried = await request(asTestServer(second), "POST", `/v1/broadcasts/${id}/runs/${finished.runs[0].id}/retry-failed`, { token: company.token })
      assert.strictEqual(retried.status, 200, JSON.stringify(retried.body))
      assert.strictEqual(retried.body.data.status, "processing")
      const again = await waitFor(asTestServer(second), company.token, id, (b) => b.status === "completed", 30_000)
      assert.strictEqual(again.stats.sent, contactIds.length)
    }
  }, 240_000)
})

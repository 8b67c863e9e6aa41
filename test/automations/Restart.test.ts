import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect } from "effect"
import { type AddressInfo } from "node:net"
import { createServer } from "node:http"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { freshDatabase } from "../integrations/support.ts"
import { createChannel, inbound } from "../messages/support.ts"
import { onDatabase } from "../support/Databases.ts"
import { type ServerProcess, spawnServer } from "../support/Processes.ts"
import { createCompany, request, type TestServer } from "../support/TestServer.ts"
import { actionNode, activeAutomation, chain, ok, runsOf, sleep, trigger, waitFor } from "./support.ts"

const platformKey = `automations-platform-key-${Math.random().toString(36).slice(2)}`
const asTestServer = (p: ServerProcess): TestServer => ({ url: p.url, platformKey, close: async () => {} })

describe.runIf(process.env.DATABASE_URL)("an automation run across a kill -9", () => {
  let database: { readonly url: string; readonly drop: () => Promise<void> }
  const processes: Array<ServerProcess> = []

  beforeAll(async () => {
    database = (await freshDatabase())!
  }, 60_000)

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop(2_000)))
    await database?.drop()
  }, 60_000)

  it("finishes a one-minute wait, and a first segment cut short, after the server died during them, sending exactly once", async () => {
    // Holds each request until released: the second automation's first segment is mid-step when the server dies.
    let hanging = true
    const held: Array<() => void> = []
    const receiver = createServer((_req, res) => {
      const answer = () => res.writeHead(200, { "content-type": "application/json" }).end("{\"ok\":true}")
      if (hanging) held.push(answer)
      else answer()
    })
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
    const port = (receiver.address() as AddressInfo).port
    const env = { DATABASE_URL: database.url, CLUSTER: "single", PLATFORM_API_KEY: platformKey, WEBHOOK_ALLOW_PRIVATE: "true" }
    const first = await spawnServer("automations-1", env, { readyTimeoutMs: 90_000 })
    processes.push(first)
    const server = asTestServer(first)
    const company = await createCompany(server)
    const channelId = await createChannel(server as any, company.token, "msgr_b")
    const automation = await activeAutomation(server, company.token, chain([
      actionNode("hello", "send-message", { text: "Thanks, we got it." }),
      actionNode("w", "wait", { duration: 1, unit: "minutes" }),
      actionNode("later", "send-message", { text: "Still there?" })
    ]), [trigger("message.created")])
    const cut = await activeAutomation(server, company.token, chain([
      actionNode("before", "send-message", { text: "Before the call." }),
      actionNode("call", "http-request", { url: `http://127.0.0.1:${port}/hold`, method: "GET", timeout_seconds: 30 }),
      actionNode("after", "send-message", { text: "After the call." })
    ]), [trigger("message.created")], "Cut")
    const received = await inbound(server as any, company.token, channelId, { from: { external_id: "r-1", name: "Rae" }, text: "hi" })
    const waiting = await waitFor("the run to wait", async () => {
      const [run] = await runsOf(server, company.token, automation.id)
      return run?.status === "waiting" ? run : undefined
    }, 20_000)
    await waitFor("the call to hang", async () => (held.length > 0 ? true : undefined), 20_000)
    process.kill(first.pid!, "SIGKILL")
    hanging = false
    await first.stop(1_000)

    const second = await spawnServer("automations-2", env, { readyTimeoutMs: 90_000 })
    processes.push(second)
    const after = asTestServer(second)
    const done = await waitFor("the run to finish", async () => {
      const run = await ok(after, "GET", `/v1/automations/${automation.id}/runs/${waiting.id}`, company.token)
      return run.status === "succeeded" || run.status === "failed" ? run : undefined
    }, 100_000)
    assert.strictEqual(done.status, "succeeded", JSON.stringify(done))
    assert.deepStrictEqual(done.steps.map((s: any) => [s.node_id, s.status]), [["hello", "succeeded"], ["w", "succeeded"], ["later", "succeeded"]])
    const waited = Date.parse(done.steps[2].started_at) - Date.parse(done.steps[1].started_at)
    assert.isAtLeast(waited, 59_000)
    const messages = await request(after, "GET", `/v1/messages?conversation_id=${received.conversation_id}&perPage=50`, { token: company.token })
    const texts = JSON.stringify(messages.body)
    assert.strictEqual(texts.split("Still there?").length - 1, 1, texts)
    assert.strictEqual(texts.split("Thanks, we got it.").length - 1, 1, texts)
    assert.strictEqual((await runsOf(after, company.token, automation.id)).length, 1)

    // The cut segment's fallback job (due 30 s after its last hold) carried on after the step it had written.
    const [cutRun] = await runsOf(after, company.token, cut.id)
    const cutDone = await waitFor("the cut run to finish", async () => {
      const run = await ok(after, "GET", `/v1/automations/${cut.id}/runs/${cutRun.id}`, company.token)
      return run.status === "succeeded" || run.status === "failed" ? run : undefined
    }, 60_000)
    assert.strictEqual(cutDone.status, "succeeded", JSON.stringify(cutDone))
    assert.deepStrictEqual(cutDone.steps.map((s: any) => [s.node_id, s.status]), [["before", "succeeded"], ["call", "succeeded"], ["after", "succeeded"]])
    const all = JSON.stringify((await request(after, "GET", `/v1/messages?conversation_id=${received.conversation_id}&perPage=50`, { token: company.token })).body)
    assert.strictEqual(all.split("Before the call.").length - 1, 1, all)
    assert.strictEqual(all.split("After the call.").length - 1, 1, all)
    receiver.close()
    // Every server on the database consumes every company's events: the next test needs it to itself.
    await second.stop(2_000)
  }, 240_000)

  it("starts the run of an inbound message whose server died after the commit and before the run row", async () => {
    const env = { DATABASE_URL: database.url, CLUSTER: "single", PLATFORM_API_KEY: platformKey }
    const first = await spawnServer("automations-3", env, { readyTimeoutMs: 90_000 })
    processes.push(first)
    const server = asTestServer(first)
    const company = await createCompany(server)
    const channelId = await createChannel(server as any, company.token, "msgr_b")
    const automation = await activeAutomation(server, company.token, chain([
      actionNode("hello", "send-message", { text: "Replayed hello." })
    ]), [trigger("message.created")])

    // Admission writes the run row and its fallback job in one statement; while this transaction holds the
    // jobs table the consumer blocks on it, so nothing of the run is durable when the server dies.
    const locked = Deferred.makeUnsafe<void>()
    const release = Deferred.makeUnsafe<void>()
    const holder = onDatabase(database.url, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`LOCK TABLE jobs IN EXCLUSIVE MODE`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
        return yield* Effect.fail("rolled back")
      }))
    }).pipe(Effect.ignore))
    await Effect.runPromise(Deferred.await(locked))
    const received = await inbound(server as any, company.token, channelId, { from: { external_id: "lost-1", name: "Lou" }, text: "hi" })
    const blocked = await waitFor("the admission to block", async () => {
      const [row] = await onDatabase(database.url, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ pid: number }>`
          SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%INSERT INTO automation_runs%'`
      }))
      return row?.pid
    }, 20_000)
    process.kill(first.pid!, "SIGKILL")
    await first.stop(1_000)
    // A backend waiting on a lock notices its client is gone only when it next talks to it: ended here, as
    // the server's connection would be, so the statement never commits.
    await onDatabase(database.url, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`SELECT pg_terminate_backend(${blocked})`
    }))
    await Effect.runPromise(Deferred.succeed(release, undefined))
    await holder
    await sleep(300)
    const lost = await onDatabase(database.url, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM automation_runs WHERE automation_id = ${automation.id}`
    }))
    assert.strictEqual(lost[0].n, 0, "the dead server wrote no run")

    const second = await spawnServer("automations-4", env, { readyTimeoutMs: 90_000 })
    processes.push(second)
    const after = asTestServer(second)
    const done = await waitFor("the replayed run to finish", async () => {
      const [run] = await runsOf(after, company.token, automation.id)
      return run?.status === "succeeded" || run?.status === "failed" ? run : undefined
    }, 30_000)
    assert.strictEqual(done.status, "succeeded", JSON.stringify(done))
    assert.strictEqual((await runsOf(after, company.token, automation.id)).length, 1)
    const sent = await onDatabase(database.url, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ message_content: string }>`
        SELECT message_content FROM messages WHERE conversation_id = ${received.conversation_id} AND direction = 'outbound'`
    }))
    assert.deepStrictEqual(sent.map((m) => m.message_content), ["Replayed hello."])
  }, 120_000)
})

import { assert, describe, it } from "@effect/vitest"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import { send } from "../messages/support.ts"
import { telegramChannel } from "../stickers/telegram.ts"
import { fileServer } from "../support/FileServer.ts"
import { query } from "../support/Sql.ts"
import { createCompany } from "../support/TestServer.ts"

const deadlineMs = 1_000
const tg = new TelegramFake()
const server = fileServer(() => ({ telegramApiBase: tg.http.url, requestDeadlineMs: deadlineMs, providerTimeoutMs: 4_000 }), [tg.http])

/** A Telegram chat the company has already written to: its channel and thread. */
const chat = async (token: string) => {
  const bot = await telegramChannel(server, tg, token)
  const first = await send(server, token, { channel_id: bot.id, to: { external_id: String(1000 + Math.floor(Math.random() * 1e6)) }, text: "hi" })
  assert.strictEqual(first.status, 201, JSON.stringify(first.body))
  return { channelId: bot.id, threadId: first.body.data.thread_id as number }
}

const timed = async <A>(f: () => Promise<A>) => {
  const started = performance.now()
  const value = await f()
  return { value, ms: performance.now() - started }
}

describe("no handler can hang", () => {
  it("refuses a NUL-byte send and serves the next send of the same conversation at once", async () => {
    const company = await createCompany(server)
    const c = await chat(company.token)
    const [bad, good] = await Promise.all([
      timed(() => send(server, company.token, { channel_id: c.channelId, thread_id: c.threadId, text: "nul\u0000byte" }, { "idempotency-key": "k-nul" })),
      timed(() => send(server, company.token, { channel_id: c.channelId, thread_id: c.threadId, text: "fine" }, { "idempotency-key": "k-fine" }))
    ])
    assert.strictEqual(bad.value.status, 422)
    assert.deepStrictEqual(bad.value.body.errors, { text: ["The text field must not contain control characters."] })
    assert.strictEqual(good.value.status, 201, JSON.stringify(good.value.body))
    assert.isBelow(good.ms, 1_000)
    // Idempotency keys a handler would use are checked before it too: a tab or bytes above 0x7F never reach the lane.
    for (const key of ["tab\tkey", "caf\u00e9"]) {
      const refused = await timed(() => send(server, company.token, { channel_id: c.channelId, thread_id: c.threadId, text: "k" }, { "idempotency-key": key }))
      assert.strictEqual(refused.value.status, 422)
      assert.deepStrictEqual(Object.keys(refused.value.body.errors), ["idempotency_key"])
    }
  })

  it("answers 503 {message} at the request deadline while the provider hangs, and the send still settles", async () => {
    const company = await createCompany(server)
    const c = await chat(company.token)
    tg.http.inject("sendMessage", "hang")
    const slow = await timed(() => send(server, company.token, { channel_id: c.channelId, thread_id: c.threadId, text: "stuck" }))
    assert.strictEqual(slow.value.status, 503)
    assert.deepStrictEqual(slow.value.body, { message: "The request could not be completed in time; retry shortly." })
    assert.isAtLeast(slow.ms, deadlineMs - 50)
    assert.isBelow(slow.ms, deadlineMs + 1_500)
    // The send itself was not abandoned half-way: once the provider times out it is recorded as failed.
    const deadline = Date.now() + 8_000
    let status: string | undefined
    while (Date.now() < deadline) {
      const rows = await query<{ status: string }>(server, "SELECT status FROM messages WHERE thread_id = $1 AND message_content = 'stuck'", [c.threadId])
      status = rows[0]?.status
      if (status === "failed") break
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    assert.strictEqual(status, "failed")
    const next = await send(server, company.token, { channel_id: c.channelId, thread_id: c.threadId, text: "after" })
    assert.strictEqual(next.status, 201)
  }, 20_000)

  it("keeps companies apart: another company's thread is 404", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const c = await chat(a.token)
    const bot = await telegramChannel(server, tg, b.token)
    const res = await send(server, b.token, { channel_id: bot.id, thread_id: c.threadId, text: "not yours" })
    assert.strictEqual(res.status, 404)
  })
})

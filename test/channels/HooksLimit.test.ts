import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

const limit = 3

let server: RunningServer
beforeAll(async () => {
  server = await startServer({ hooksRateLimitPerMinute: limit })
})
afterAll(() => server?.close())

const telegramChannel = async () => {
  const company = await createCompany(server)
  const res = await request(server, "POST", "/v1/channels", {
    token: company.token,
    body: { type: "msgr_b", provider: "telegram", name: "Bot", credentials: { bot_token: "700300:AAlimitTestBotTokenValue_123456" } }
  })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  const id = res.body.data.id as number
  const [row] = await query<{ webhook_secret: string }>(server, "SELECT webhook_secret FROM channels WHERE id = $1", [id])
  return { id, secret: row.webhook_secret }
}

const update = (n: number) =>
  JSON.stringify({ update_id: n, message: { message_id: n, date: 1_700_000_000, chat: { id: 42, type: "private" }, from: { id: 42, first_name: "Ann" }, text: `hi ${n}` } })

const hook = (channel: number, secret: string, n: number) =>
  request(server, "POST", `/hooks/telegram/${channel}`, {
    raw: update(n),
    headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": secret }
  })

describe("provider webhook throttle", () => {
  it("answers 429 with Retry-After past the per-channel, per-IP limit, forged or not, and stores nothing then", async () => {
    const a = await telegramChannel()
    assert.strictEqual((await hook(a.id, "forged", 1)).status, 401)
    assert.strictEqual((await hook(a.id, a.secret, 2)).status, 200)
    assert.strictEqual((await hook(a.id, a.secret, 3)).status, 200)
    const limited = await hook(a.id, a.secret, 4)
    assert.strictEqual(limited.status, 429)
    assert.strictEqual(limited.body.message, "Too Many Requests.")
    assert.isAbove(Number(limited.headers.get("retry-after")), 0)
    const stored = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM messages WHERE channel_id = $1", [a.id])
    assert.strictEqual(stored[0].n, 2)
    // Another company's channel has its own budget.
    const b = await telegramChannel()
    assert.strictEqual((await hook(b.id, b.secret, 5)).status, 200)
  })
})

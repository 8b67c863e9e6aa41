import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { conversationOn, send } from "../messages/support.ts"
import { png } from "../support/Images.ts"
import { createCompany, getLink, type RunningServer, startServer, upload } from "../support/TestServer.ts"
import { tempDir } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer({ storageDir: tempDir() })
})
afterAll(() => server?.close())

describe("signed media rate limit", () => {
  it("serves 2000 requests a minute per IP, then 429 with Retry-After", async () => {
    const company = await createCompany(server)
    const up = await upload(server, company.token, "/v1/uploads", { bytes: await png(2, 2), name: "a.png", type: "image/png" })
    const c = await conversationOn(server, company.token)
    const sent = await send(server, company.token, { channel_id: c.channelId, thread_id: c.threadId, attachments: [{ media_id: up.body.media_id }] })
    const link = sent.body.data.attachments[0].url
    const other = await createCompany(server)
    const foreign = await getLink(server, link.replace(/\/v1\/messages\/\d+\//, `/v1/messages/${c.inboundId}/`))
    assert.strictEqual(foreign.status, 403, "a link does not stretch to another message")
    const otherList = await fetch(`${server.url}/v1/messages/${sent.body.data.id}/attachments`, { headers: { authorization: `Bearer ${other.token}` } })
    assert.strictEqual(otherList.status, 404)
    let ok = 0
    const workers = Array.from({ length: 16 }, async () => {
      while (ok < 1999) {
        ok++
        const res = await getLink(server, link)
        assert.strictEqual(res.status, 200)
      }
    })
    await Promise.all(workers)
    assert.strictEqual(ok, 1999, "1999 here plus the foreign attempt above make 2000")
    const limited = await getLink(server, link)
    assert.strictEqual(limited.status, 429)
    assert.ok(Number(limited.headers.get("retry-after")) > 0)
    assert.strictEqual(JSON.parse(Buffer.from(limited.bytes).toString()).message, "Too Many Requests.")
    // A bad signature is counted too, and still limited (the limit comes first).
    assert.strictEqual((await getLink(server, link.replace(/signature=.*/, "signature=x"))).status, 429)
  })
})

import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import { conversationOn, send } from "../messages/support.ts"
import { fileServer } from "../support/FileServer.ts"
import { png } from "../support/Images.ts"
import { sniffMime } from "../../src/platform/files/Sniff.ts"
import { createCompany, getLink, request, upload } from "../support/TestServer.ts"
import { tempDir } from "./support.ts"

const botToken = "700301:AAsniffTestBotTokenValue_1234567"
const tg = new TelegramFake()
tg.tokens.add(botToken)
const server = fileServer(() => ({ storageDir: tempDir(), telegramApiBase: tg.http.url, appUrl: "https://crm.example.test" }), [tg.http])

const html = new TextEncoder().encode("<!doctype html><html><body><script>alert(1)</script></body></html>\n")

describe("uploads are what their bytes say", () => {
  it("stores a PNG declared as text/html as image/png, an image that sends as one", async () => {
    const a = await createCompany(server)
    const res = await upload(server, a.token, "/v1/uploads", { bytes: await png(40, 30), name: "page.html", type: "text/html" })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.mime_type, "image/png")
    assert.strictEqual(res.body.type, "image")
    const c = await conversationOn(server, a.token)
    const sent = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, attachments: [{ media_id: res.body.media_id, type: "image" }] })
    assert.strictEqual(sent.status, 201, JSON.stringify(sent.body))
    const file = await getLink(server, sent.body.data.attachments[0].url)
    assert.strictEqual(file.status, 200)
    assert.match(file.headers.get("content-type") ?? "", /^image\/png/)
  })

  it("stores HTML declared as image/png as text/plain, and refuses it as an image (422); another company cannot send it", async () => {
    const a = await createCompany(server)
    const res = await upload(server, a.token, "/v1/uploads", { bytes: html, name: "cat.png", type: "image/png" })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.mime_type, "text/plain")
    assert.strictEqual(res.body.type, "document")
    const c = await conversationOn(server, a.token)
    const asImage = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, attachments: [{ media_id: res.body.media_id, type: "image" }] })
    assert.strictEqual(asImage.status, 422, JSON.stringify(asImage.body))
    assert.deepStrictEqual(Object.keys(asImage.body.errors), ["attachments.0.type"])
    const photo = await request(server, "POST", "/v1/contacts", { token: a.token, body: { firstName: "P", photo_media_id: res.body.media_id } })
    assert.strictEqual(photo.status, 422)

    const b = await createCompany(server)
    const other = await conversationOn(server, b.token)
    const foreign = await send(server, b.token, { channel_id: other.channelId, thread_id: other.threadId, attachments: [{ media_id: res.body.media_id }] })
    assert.strictEqual(foreign.status, 422)
    assert.strictEqual(foreign.body.error_code ?? Object.keys(foreign.body.errors ?? {})[0], "attachment_source_invalid")
  })

  it("keeps declarations the bytes cannot contradict and refines containers", async () => {
    const sniff = (bytes: Uint8Array, declared: string) => Effect.runPromise(sniffMime(bytes, declared))
    assert.strictEqual(await sniff(new TextEncoder().encode("a,b\n1,2\n"), "text/csv"), "text/csv")
    assert.strictEqual(await sniff(html, "text/html"), "text/html")
    assert.strictEqual(await sniff(new Uint8Array([0, 1, 2, 3, 255, 254]), "image/jpeg"), "application/octet-stream")
    const zip = new Uint8Array([0x50, 0x4b, 0x03, 0x04, ...new Array(60).fill(0)])
    const xlsx = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    assert.include([xlsx], await sniff(zip, xlsx))
  })
})

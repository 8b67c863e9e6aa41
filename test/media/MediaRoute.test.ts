import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Option, Redacted } from "effect"
import { existsSync, statSync } from "node:fs"
import { join } from "node:path"
import sharp from "sharp"
import { afterAll, beforeAll } from "vitest"
import { SignedUrls } from "../../src/platform/files/SignedUrls.ts"
import { conversationOn } from "../messages/support.ts"
import { jpeg, png, svg } from "../support/Images.ts"
import { createCompany, getLink, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { attached, tempDir } from "./support.ts"

let server: RunningServer
const storage = tempDir()
beforeAll(async () => {
  server = await startServer({ storageDir: storage, signingKey: Option.some(Redacted.make("media-route-key-1")) })
})
afterAll(() => server?.close())

const stored = (path: string) => join(storage, ...path.split("/"))

const withParam = (link: string, key: string, value: string | null) => {
  const url = new URL(link)
  if (value === null) url.searchParams.delete(key)
  else url.searchParams.set(key, value)
  return url.toString()
}

/** A real PNG just over the 25-megapixel decode budget: tiny on disk, 75 MB once decoded (a "pixel flood"). */
const pixelFlood = () =>
  sharp({ create: { width: 5001, height: 5001, channels: 3, background: { r: 1, g: 2, b: 3 } } })
    .png({ compressionLevel: 9 })
    .toBuffer()
    .then((b) => new Uint8Array(b))

describe("GET .../attachments/{attachment}/media", () => {
  it("serves WebP thumbnails of 256 and 640, made once and kept, and the original for any other w", async () => {
    const company = await createCompany(server)
    const original = await jpeg(1000, 500)
    const att = await attached(server, company.token, { bytes: original, name: "wide.jpg", type: "image/jpeg" })
    assert.strictEqual(new URL(att.thumbnail_url).searchParams.get("w"), "640")

    for (const [w, height] of [[256, 128], [640, 320]] as const) {
      const res = await getLink(server, withParam(att.url, "w", String(w)).replace(/&signature=[^&]+/, "") + "&signature=x")
      assert.strictEqual(res.status, 403, "w is covered by the signature")
      const link = w === 640 ? att.thumbnail_url : await server.runInApp(SignedUrls.use((s) =>
        Effect.succeed(s.sign(new URL(att.url).pathname, { params: { c: String(company.id), w: "256" } }))
      ))
      const thumb = await getLink(server, link)
      assert.strictEqual(thumb.status, 200)
      assert.strictEqual(thumb.headers.get("content-type"), "image/webp")
      assert.strictEqual(thumb.headers.get("x-content-type-options"), "nosniff")
      const meta = await sharp(thumb.bytes).metadata()
      assert.deepStrictEqual([meta.format, meta.width, meta.height], ["webp", w, height])
      const kept = stored(`${att.storage_path}.w${w}.webp`)
      assert.ok(existsSync(kept), "the thumbnail is kept next to the original")
      const made = statSync(kept).mtimeMs
      const again = await getLink(server, link)
      assert.deepStrictEqual(again.bytes, thumb.bytes)
      assert.strictEqual(statSync(kept).mtimeMs, made, "served from the kept file, not made again")
    }

    const odd = await server.runInApp(SignedUrls.use((s) =>
      Effect.succeed(s.sign(new URL(att.url).pathname, { params: { c: String(company.id), w: "100" } }))
    ))
    const res = await getLink(server, odd)
    assert.strictEqual(res.status, 200)
    assert.strictEqual(res.headers.get("content-type"), "image/jpeg")
    assert.deepStrictEqual(res.bytes, original)
    assert.ok(!existsSync(stored(`${att.storage_path}.w100.webp`)))
  })

  it("ignores w for non-images and SVG, and has no thumbnail_url for them", async () => {
    const company = await createCompany(server)
    const pdf = new TextEncoder().encode("%PDF-1.4\n%fake\n")
    const doc = await attached(server, company.token, { bytes: pdf, name: "a.pdf", type: "application/pdf" })
    assert.strictEqual(doc.thumbnail_url, null)
    const image = await attached(server, company.token, { bytes: svg, name: "logo.svg", type: "image/svg+xml" })
    assert.strictEqual(image.thumbnail_url, null, "no thumbnail for SVG")
    for (const att of [doc, image]) {
      const link = await server.runInApp(SignedUrls.use((s) =>
        Effect.succeed(s.sign(new URL(att.url).pathname, { params: { c: String(company.id), w: "640" } }))
      ))
      const res = await getLink(server, link)
      assert.strictEqual(res.status, 200)
      assert.notStrictEqual(res.headers.get("content-type"), "image/webp")
      assert.strictEqual(res.bytes.byteLength, att.size)
    }
  })

  it("serves unsafe inline types as octet-stream attachments with nosniff, safe ones inline", async () => {
    const company = await createCompany(server)
    const cases = [
      { bytes: svg, name: "logo.svg", type: "image/svg+xml", inline: false },
      { bytes: new TextEncoder().encode("<html><script>alert(1)</script></html>"), name: "page.html", type: "text/html", inline: false },
      { bytes: new TextEncoder().encode("<?xml version=\"1.0\"?><a/>"), name: "data.xml", type: "application/xml", inline: false },
      { bytes: new TextEncoder().encode("plain words"), name: "notes.txt", type: "text/plain", inline: false },
      { bytes: new TextEncoder().encode("alert(1)"), name: "x.js", type: "application/javascript", inline: false },
      { bytes: await png(4, 4), name: "ok.png", type: "image/png", inline: true },
      { bytes: new TextEncoder().encode("%PDF-1.4"), name: "ok.pdf", type: "application/pdf", inline: true }
    ]
    for (const c of cases) {
      const att = await attached(server, company.token, c)
      const res = await getLink(server, att.url)
      assert.strictEqual(res.status, 200, c.name)
      assert.strictEqual(res.headers.get("x-content-type-options"), "nosniff", c.name)
      assert.deepStrictEqual(res.bytes, c.bytes, c.name)
      if (c.inline) {
        assert.strictEqual(res.headers.get("content-type"), c.type, c.name)
        assert.match(res.headers.get("content-disposition")!, /^inline/, c.name)
      } else {
        assert.strictEqual(res.headers.get("content-type"), "application/octet-stream", c.name)
        assert.match(res.headers.get("content-disposition")!, new RegExp(`^attachment; filename="${c.name.replace(".", "\\.")}"`), c.name)
      }
    }
  })

  it("falls back to the original for a pixel flood and a truncated image, making no thumbnail", async () => {
    const company = await createCompany(server)
    const flood = await pixelFlood()
    const full = await jpeg(600, 400)
    const truncated = full.subarray(0, Math.floor(full.byteLength / 2))
    for (const [bytes, name, type] of [[flood, "flood.png", "image/png"], [truncated, "cut.jpg", "image/jpeg"]] as const) {
      const att = await attached(server, company.token, { bytes, name, type })
      const res = await getLink(server, att.thumbnail_url)
      assert.strictEqual(res.status, 200, name)
      assert.strictEqual(res.headers.get("content-type"), type, name)
      assert.deepStrictEqual(res.bytes, bytes, name)
      assert.ok(!existsSync(stored(`${att.storage_path}.w640.webp`)), name)
    }
  })

  it("refuses tampered, unsigned and expired links with 403, and needs no Authorization header", async () => {
    const company = await createCompany(server)
    const att = await attached(server, company.token, { bytes: await png(10, 10), name: "a.png", type: "image/png" })
    assert.strictEqual((await getLink(server, att.url)).status, 200)
    const url = new URL(att.url)
    const tampered = [
      withParam(att.url, "signature", null),
      withParam(att.url, "signature", url.searchParams.get("signature")!.replace(/^./, (c) => (c === "A" ? "B" : "A"))),
      withParam(att.url, "c", String(company.id + 1)),
      withParam(att.url, "w", "256"),
      withParam(att.url, "extra", "1"),
      att.url.replace(`/attachments/${att.id}/`, `/attachments/${att.id + 1}/`),
      att.url.replace(`/messages/${att.message_id}/`, `/messages/${att.message_id + 1}/`)
    ]
    for (const link of tampered) {
      const res = await getLink(server, link)
      assert.strictEqual(res.status, 403, link)
      assert.deepStrictEqual(JSON.parse(Buffer.from(res.bytes).toString()), { message: "Invalid signature." })
    }
    const [expired, valid] = await server.runInApp(Effect.gen(function*() {
      const signed = yield* SignedUrls
      const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
      const params = { c: String(company.id) }
      return [signed.sign(url.pathname, { params, expiresAt: now - 5 }), signed.sign(url.pathname, { params, expiresAt: now + 60 })]
    }))
    assert.strictEqual((await getLink(server, expired)).status, 403)
    assert.strictEqual((await getLink(server, valid)).status, 200)
    assert.strictEqual((await getLink(server, withParam(valid, "expires", String(Number(new URL(valid).searchParams.get("expires")) + 3600)))).status, 403)
  })

  it("answers 404 to a validly signed link naming another company than the attachment's", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const att = await attached(server, a.token, { bytes: await png(10, 10), name: "a.png", type: "image/png" })
    const crossed = await server.runInApp(SignedUrls.use((s) =>
      Effect.succeed(s.sign(new URL(att.url).pathname, { params: { c: String(b.id) } }))
    ))
    assert.strictEqual((await getLink(server, crossed)).status, 404)
    const fetched = await request(server, "POST", `/v1/messages/${att.message_id}/attachments/${att.id}/fetch`, { token: b.token })
    assert.strictEqual(fetched.status, 404)
  })

  it("answers 404 for a signed link whose attachment has no stored file", async () => {
    const company = await createCompany(server)
    const c = await conversationOn(server, company.token)
    const link = await server.runInApp(SignedUrls.use((s) =>
      Effect.succeed(s.sign(`/v1/messages/${c.inboundId}/attachments/999999/media`, { params: { c: String(company.id) } }))
    ))
    assert.strictEqual((await getLink(server, link)).status, 404)
  })
})

describe("rotating APP_KEY", () => {
  it("revokes every link; the API then hands out new ones", async () => {
    const dataDir = tempDir()
    const files = tempDir()
    const first = await startServer({ dataDir, storageDir: files, signingKey: Option.some(Redacted.make("rotation-key-one")) })
    let company: Awaited<ReturnType<typeof createCompany>>
    let att: any
    try {
      company = await createCompany(first)
      att = await attached(first, company.token, { bytes: await png(20, 20), name: "a.png", type: "image/png" })
      assert.strictEqual((await getLink(first, att.url)).status, 200)
    } finally {
      await first.close()
    }
    const second = await startServer({ dataDir, storageDir: files, signingKey: Option.some(Redacted.make("rotation-key-two")) })
    try {
      assert.strictEqual((await getLink(second, att.url)).status, 403)
      assert.strictEqual((await getLink(second, att.thumbnail_url)).status, 403)
      const now = await request(second, "GET", `/v1/messages/${att.message_id}/attachments`, { token: company!.token })
      const fresh = now.body.data[0]
      assert.notStrictEqual(fresh.url, att.url)
      assert.strictEqual((await getLink(second, fresh.url)).status, 200)
    } finally {
      await second.close()
    }
  })
})

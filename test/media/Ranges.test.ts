import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { randomBytes } from "node:crypto"
import { closeSync, openSync, statSync, truncateSync, writeSync } from "node:fs"
import { join } from "node:path"
import sharp from "sharp"
import { afterAll, beforeAll } from "vitest"
import { BlobStore } from "../../src/platform/files/BlobStore.ts"
import { bytesFileResponse, parseRange } from "../../src/platform/files/FileResponse.ts"
import { SignedUrls } from "../../src/platform/files/SignedUrls.ts"
import { createContact } from "../contacts/support.ts"
import { createPack, uploadStickers } from "../stickers/support.ts"
import { jpeg, png, svg } from "../support/Images.ts"
import { createCompany, getLink, type RunningServer, startServer, upload } from "../support/TestServer.ts"
import { attached, tempDir, tone } from "./support.ts"

let server: RunningServer
const storage = tempDir("crm-ranges-")
beforeAll(async () => {
  server = await startServer({ storageDir: storage, signingKey: Option.some(Redacted.make("ranges-key-1")) })
})
afterAll(() => server?.close())

const stored = (path: string) => join(storage, ...path.split("/"))

const signFor = (pathname: string, params: Record<string, string>) =>
  server.runInApp(SignedUrls.use((s) => Effect.succeed(s.sign(pathname, { params }))))

const json = (bytes: Uint8Array) => JSON.parse(Buffer.from(bytes).toString("utf8"))

/**
 * 300 KB: an MP4 ftyp box (uploads are typed by their bytes) then random bytes, several read-stream
 * chunks, so ranges cross chunk edges.
 */
const blob = new Uint8Array(randomBytes(300 * 1024))
blob.set([0, 0, 0, 24, ...new TextEncoder().encode("ftypisom"), 0, 0, 2, 0, ...new TextEncoder().encode("isomiso2")])

describe("byte ranges on the media route", () => {
  it("answers one range with 206, Content-Range and exactly those bytes; no Range gives 200 with Accept-Ranges", async () => {
    const company = await createCompany(server)
    const att = await attached(server, company.token, { bytes: blob, name: "clip.mp4", type: "video/mp4" })
    const size = blob.byteLength

    const whole = await getLink(server, att.url)
    assert.strictEqual(whole.status, 200)
    assert.strictEqual(whole.headers.get("accept-ranges"), "bytes")
    assert.strictEqual(whole.headers.get("content-length"), String(size))
    assert.strictEqual(whole.headers.get("content-range"), null)
    assert.deepStrictEqual(whole.bytes, blob)

    const cases: ReadonlyArray<[string, number, number]> = [
      ["bytes=0-99", 0, 99],
      ["bytes=0-0", 0, 0],
      ["bytes=65530-131080", 65530, 131080],
      ["bytes=150000-", 150000, size - 1],
      ["bytes=-500", size - 500, size - 1],
      ["bytes=-999999999", 0, size - 1],
      ["bytes=300000-999999999", 300000, size - 1],
      [" bytes = 10 - 19 ", 10, 19]
    ]
    for (const [range, start, end] of cases) {
      const part = await getLink(server, att.url, { range })
      assert.strictEqual(part.status, 206, range)
      assert.strictEqual(part.headers.get("content-range"), `bytes ${start}-${end}/${size}`, range)
      assert.strictEqual(part.headers.get("content-length"), String(end - start + 1), range)
      assert.strictEqual(part.headers.get("content-type"), "video/mp4", range)
      assert.strictEqual(part.headers.get("accept-ranges"), "bytes", range)
      assert.strictEqual(part.headers.get("etag"), whole.headers.get("etag"), range)
      assert.deepStrictEqual(part.bytes, blob.subarray(start, end + 1), range)
    }
  })

  it("lets a player seek in a real ffmpeg-made audio file: the ranges put together are the file", async () => {
    const company = await createCompany(server)
    const audio = tone("mp3", 3)
    const att = await attached(server, company.token, { bytes: audio, name: "tone.mp3", type: "audio/mpeg" })
    const size = audio.byteLength
    const probe = await getLink(server, att.url, { range: "bytes=0-" })
    assert.strictEqual(probe.status, 206)
    assert.strictEqual(probe.headers.get("content-range"), `bytes 0-${size - 1}/${size}`)
    assert.strictEqual(probe.headers.get("content-type"), "audio/mpeg")
    assert.deepStrictEqual(probe.bytes, audio)
    const third = Math.floor(size / 3)
    const pieces = [
      await getLink(server, att.url, { range: `bytes=0-${third - 1}` }),
      await getLink(server, att.url, { range: `bytes=${third}-${2 * third - 1}` }),
      await getLink(server, att.url, { range: `bytes=${2 * third}-` })
    ]
    assert.deepStrictEqual(pieces.map((p) => p.status), [206, 206, 206])
    assert.deepStrictEqual(new Uint8Array(Buffer.concat(pieces.map((p) => p.bytes))), audio)
  })

  it("answers an unsatisfiable range with 416, Content-Range bytes */size and a {message} body", async () => {
    const company = await createCompany(server)
    const att = await attached(server, company.token, { bytes: blob.subarray(0, 1000), name: "a.pdf", type: "application/pdf" })
    for (const range of ["bytes=1000-", "bytes=1000-2000", "bytes=-0", "bytes=99999999999-"]) {
      const res = await getLink(server, att.url, { range })
      assert.strictEqual(res.status, 416, range)
      assert.strictEqual(res.headers.get("content-range"), "bytes */1000", range)
      assert.match(res.headers.get("content-type")!, /^application\/json/, range)
      assert.deepStrictEqual(json(res.bytes), { message: "The requested range is not satisfiable." }, range)
    }
  })

  it("serves the whole file with 200 for several ranges, malformed ranges and other units", async () => {
    const company = await createCompany(server)
    const bytes = blob.subarray(0, 5000)
    const att = await attached(server, company.token, { bytes, name: "b.pdf", type: "application/pdf" })
    for (const range of ["bytes=0-1,5-6", "bytes=0-99, 200-299", "bytes=abc", "bytes=5-2", "items=0-5", "bytes=-", "bytes 0-5"]) {
      const res = await getLink(server, att.url, { range })
      assert.strictEqual(res.status, 200, range)
      assert.strictEqual(res.headers.get("content-range"), null, range)
      assert.deepStrictEqual(res.bytes, bytes, range)
    }
  })

  it("sends a strong ETag and Last-Modified; If-None-Match and If-Modified-Since give 304 without a body", async () => {
    const company = await createCompany(server)
    const att = await attached(server, company.token, { bytes: await png(40, 40), name: "p.png", type: "image/png" })
    const first = await getLink(server, att.url)
    const etag = first.headers.get("etag")!
    assert.match(etag, /^"[A-Za-z0-9_-]{22}"$/)
    const lastModified = first.headers.get("last-modified")!
    const mtime = statSync(stored(att.storage_path)).mtime
    assert.strictEqual(lastModified, mtime.toUTCString())
    assert.strictEqual((await getLink(server, att.url)).headers.get("etag"), etag, "stable across requests")

    for (const ifNoneMatch of [etag, `W/${etag}`, `"other", ${etag}`, "*"]) {
      const res = await getLink(server, att.url, { "if-none-match": ifNoneMatch })
      assert.strictEqual(res.status, 304, ifNoneMatch)
      assert.strictEqual(res.bytes.byteLength, 0, ifNoneMatch)
      assert.strictEqual(res.headers.get("etag"), etag, ifNoneMatch)
      assert.strictEqual(res.headers.get("cache-control"), "private, max-age=86400", ifNoneMatch)
    }
    const changed = await getLink(server, att.url, { "if-none-match": "\"something-else\"" })
    assert.strictEqual(changed.status, 200)
    assert.strictEqual(changed.bytes.byteLength, att.size)

    assert.strictEqual((await getLink(server, att.url, { "if-modified-since": lastModified })).status, 304)
    const before = new Date(mtime.getTime() - 5000).toUTCString()
    assert.strictEqual((await getLink(server, att.url, { "if-modified-since": before })).status, 200)
    assert.strictEqual((await getLink(server, att.url, { "if-modified-since": "not a date" })).status, 200)
    const precedence = await getLink(server, att.url, { "if-none-match": "\"something-else\"", "if-modified-since": lastModified })
    assert.strictEqual(precedence.status, 200, "If-None-Match wins over If-Modified-Since")
    const conditionalRange = await getLink(server, att.url, { "if-none-match": etag, range: "bytes=0-9" })
    assert.strictEqual(conditionalRange.status, 304, "a cached copy needs no range")

    const other = await attached(server, company.token, { bytes: await png(41, 40), name: "p.png", type: "image/png" })
    assert.notStrictEqual((await getLink(server, other.url)).headers.get("etag"), etag)
  })

  it("honours If-Range only for the current ETag; a date or another tag gets the whole file", async () => {
    const company = await createCompany(server)
    const bytes = blob.subarray(0, 4000)
    const att = await attached(server, company.token, { bytes, name: "c.pdf", type: "application/pdf" })
    const whole = await getLink(server, att.url)
    const etag = whole.headers.get("etag")!
    const same = await getLink(server, att.url, { range: "bytes=100-199", "if-range": etag })
    assert.strictEqual(same.status, 206)
    assert.deepStrictEqual(same.bytes, bytes.subarray(100, 200))
    for (const ifRange of ["\"stale\"", `W/${etag}`, whole.headers.get("last-modified")!]) {
      const res = await getLink(server, att.url, { range: "bytes=100-199", "if-range": ifRange })
      assert.strictEqual(res.status, 200, ifRange)
      assert.deepStrictEqual(res.bytes, bytes, ifRange)
    }
  })

  it("answers HEAD with the GET headers and no body, ignoring Range; unsigned HEAD is 403", async () => {
    const company = await createCompany(server)
    const att = await attached(server, company.token, { bytes: blob, name: "clip.mp4", type: "video/mp4" })
    const get = await getLink(server, att.url)
    const head = await getLink(server, att.url, {}, "HEAD")
    assert.strictEqual(head.status, 200)
    assert.strictEqual(head.bytes.byteLength, 0)
    for (const name of ["content-type", "content-length", "etag", "last-modified", "accept-ranges", "content-disposition", "x-content-type-options", "cache-control"]) {
      assert.strictEqual(head.headers.get(name), get.headers.get(name), name)
    }
    assert.strictEqual(head.headers.get("content-length"), String(blob.byteLength))
    const headRange = await getLink(server, att.url, { range: "bytes=0-9" }, "HEAD")
    assert.deepStrictEqual([headRange.status, headRange.headers.get("content-range")], [200, null])
    const headCached = await getLink(server, att.url, { "if-none-match": get.headers.get("etag")! }, "HEAD")
    assert.strictEqual(headCached.status, 304)
    const unsigned = new URL(att.url)
    unsigned.searchParams.delete("signature")
    const refused = await getLink(server, unsigned.toString(), {}, "HEAD")
    assert.strictEqual(refused.status, 403)
    assert.strictEqual(refused.bytes.byteLength, 0)
  })

  it("keeps ranges on thumbnails and the unsafe-type rules on ranged answers", async () => {
    const company = await createCompany(server)
    const image = await attached(server, company.token, { bytes: await jpeg(1200, 600), name: "wide.jpg", type: "image/jpeg" })
    const thumb = await getLink(server, image.thumbnail_url)
    assert.strictEqual(thumb.status, 200)
    assert.strictEqual((await sharp(thumb.bytes).metadata()).width, 640)
    const original = await getLink(server, image.url)
    assert.notStrictEqual(thumb.headers.get("etag"), original.headers.get("etag"), "a thumbnail is another representation")
    const head = await getLink(server, image.thumbnail_url, { range: "bytes=0-11" })
    assert.strictEqual(head.status, 206)
    assert.strictEqual(head.headers.get("content-type"), "image/webp")
    assert.strictEqual(head.headers.get("content-range"), `bytes 0-11/${thumb.bytes.byteLength}`)
    assert.deepStrictEqual(head.bytes, thumb.bytes.subarray(0, 12))
    assert.strictEqual(Buffer.from(head.bytes.subarray(8, 12)).toString("latin1"), "WEBP")

    const vector = await attached(server, company.token, { bytes: svg, name: "logo.svg", type: "image/svg+xml" })
    const part = await getLink(server, vector.url, { range: "bytes=0-3" })
    assert.strictEqual(part.status, 206)
    assert.strictEqual(part.headers.get("content-type"), "application/octet-stream")
    assert.match(part.headers.get("content-disposition")!, /^attachment; filename="logo\.svg"/)
    assert.strictEqual(part.headers.get("x-content-type-options"), "nosniff")
    assert.deepStrictEqual(part.bytes, svg.subarray(0, 4))
  })

  it("reads a range from disk without loading the file: the tail of a 3 GiB (sparse) file", async () => {
    const company = await createCompany(server)
    const att = await attached(server, company.token, { bytes: blob.subarray(0, 100), name: "big.mp4", type: "video/mp4" })
    const size = 3 * 1024 * 1024 * 1024
    const file = stored(att.storage_path)
    truncateSync(file, size)
    const marker = new TextEncoder().encode("the very end")
    const fd = openSync(file, "r+")
    writeSync(fd, marker, 0, marker.byteLength, size - marker.byteLength)
    closeSync(fd)
    const tail = await getLink(server, att.url, { range: `bytes=-${marker.byteLength}` })
    assert.strictEqual(tail.status, 206)
    assert.strictEqual(tail.headers.get("content-range"), `bytes ${size - marker.byteLength}-${size - 1}/${size}`)
    assert.deepStrictEqual(tail.bytes, marker)
    const start = await getLink(server, att.url, { range: "bytes=0-99" })
    assert.deepStrictEqual(start.bytes, blob.subarray(0, 100))
    const head = await getLink(server, att.url, {}, "HEAD")
    assert.strictEqual(head.headers.get("content-length"), String(size))
  })

  it("still needs the signature (403) and answers another company's attachment with 404, ranges or not", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const att = await attached(server, a.token, { bytes: blob.subarray(0, 2000), name: "d.pdf", type: "application/pdf" })
    const unsigned = new URL(att.url)
    unsigned.searchParams.delete("signature")
    const refused = await getLink(server, unsigned.toString(), { range: "bytes=0-9" })
    assert.deepStrictEqual([refused.status, json(refused.bytes)], [403, { message: "Invalid signature." }])
    const tampered = await getLink(server, att.url.replace(/signature=./, "signature=_"), { range: "bytes=0-9" })
    assert.strictEqual(tampered.status, 403)
    const crossed = await signFor(new URL(att.url).pathname, { c: String(b.id) })
    for (const headers of [{}, { range: "bytes=0-9" }, { "if-none-match": "*" }] as Array<Record<string, string>>) {
      const res = await getLink(server, crossed, headers)
      assert.strictEqual(res.status, 404, JSON.stringify(headers))
      assert.deepStrictEqual(json(res.bytes), { message: "File not found." })
    }
  })
})

describe("byte ranges on the sticker and contact photo routes", () => {
  it("sticker files: ranges, ETag/304 and HEAD; another company's link is 404", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const pack = await createPack(server, a.token)
    const up = await uploadStickers(server, a.token, pack.id, [{ name: "s.png", bytes: await png(300, 300), type: "image/png" }])
    assert.strictEqual(up.status, 200, JSON.stringify(up.body))
    const sticker = up.body.data.created[0]
    const whole = await getLink(server, sticker.url)
    assert.strictEqual(whole.status, 200)
    assert.strictEqual(whole.headers.get("content-type"), "image/webp")
    assert.strictEqual(whole.headers.get("accept-ranges"), "bytes")
    assert.strictEqual(whole.bytes.byteLength, sticker.size)
    const part = await getLink(server, sticker.url, { range: "bytes=8-15" })
    assert.deepStrictEqual([part.status, part.headers.get("content-range")], [206, `bytes 8-15/${sticker.size}`])
    assert.deepStrictEqual(part.bytes, whole.bytes.subarray(8, 16))
    assert.strictEqual((await getLink(server, sticker.url, { "if-none-match": whole.headers.get("etag")! })).status, 304)
    assert.strictEqual((await getLink(server, sticker.url, { range: `bytes=${sticker.size}-` })).status, 416)
    const head = await getLink(server, sticker.url, {}, "HEAD")
    assert.deepStrictEqual([head.status, head.bytes.byteLength, head.headers.get("content-length")], [200, 0, String(sticker.size)])
    const crossed = await signFor(new URL(sticker.url).pathname, { c: String(b.id) })
    const res = await getLink(server, crossed, { range: "bytes=0-9" })
    assert.deepStrictEqual([res.status, json(res.bytes)], [404, { message: "Sticker not found." }])
  })

  it("contact photos: the first answer (a fresh preview) and later ones share one ETag; ranges and HEAD work", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const up = await upload(server, a.token, "/v1/uploads", { bytes: await png(600, 300), name: "face.png", type: "image/png" })
    assert.strictEqual(up.status, 201, JSON.stringify(up.body))
    const contact = await createContact(server, a.token, { firstName: "Face", photo_media_id: up.body.media_id })
    const first = await getLink(server, contact.photo_url)
    assert.strictEqual(first.status, 200)
    assert.strictEqual(first.headers.get("content-type"), "image/webp")
    assert.strictEqual(first.headers.get("accept-ranges"), "bytes")
    const second = await getLink(server, contact.photo_url)
    assert.strictEqual(second.headers.get("etag"), first.headers.get("etag"))
    assert.deepStrictEqual(second.bytes, first.bytes)
    assert.strictEqual((await getLink(server, contact.photo_url, { "if-none-match": first.headers.get("etag")! })).status, 304)
    const part = await getLink(server, contact.photo_url, { range: "bytes=-4" })
    assert.strictEqual(part.status, 206)
    assert.deepStrictEqual(part.bytes, first.bytes.subarray(first.bytes.byteLength - 4))
    const head = await getLink(server, contact.photo_url, {}, "HEAD")
    assert.deepStrictEqual([head.status, head.bytes.byteLength, head.headers.get("etag")], [200, 0, first.headers.get("etag")])
    const params = Object.fromEntries([...new URL(contact.photo_url).searchParams].filter(([k]) => k !== "signature"))
    const crossed = await signFor(new URL(contact.photo_url).pathname, { ...params, c: String(b.id) })
    assert.strictEqual((await getLink(server, crossed, { range: "bytes=0-9" })).status, 404)
  })
})

describe("parseRange", () => {
  it("reads one range, flags unsatisfiable ones and ignores what RFC 9110 lets a server ignore", () => {
    assert.deepStrictEqual(parseRange("bytes=0-9", 100), { start: 0, end: 9 })
    assert.deepStrictEqual(parseRange("bytes=90-", 100), { start: 90, end: 99 })
    assert.deepStrictEqual(parseRange("bytes=-10", 100), { start: 90, end: 99 })
    assert.deepStrictEqual(parseRange("BYTES=5-500", 100), { start: 5, end: 99 })
    assert.strictEqual(parseRange("bytes=100-", 100), "unsatisfiable")
    assert.strictEqual(parseRange("bytes=-5", 0), "unsatisfiable")
    assert.strictEqual(parseRange("bytes=0-", 0), "unsatisfiable")
    for (const ignored of [undefined, "", "bytes=", "bytes=-", "bytes=9-1", "bytes=0-1,3-4", "bits=0-1", "bytes=1.5-2", "bytes=-1-2"]) {
      assert.strictEqual(parseRange(ignored, 100), undefined, String(ignored))
    }
  })
})

describe("bytes answers (fetched pictures)", () => {
  const ask = (headers: Record<string, string>, method = "GET") =>
    Effect.provideService(
      bytesFileResponse(new TextEncoder().encode("0123456789"), { mimeType: "image/png", fileName: null }),
      HttpServerRequest.HttpServerRequest,
      HttpServerRequest.fromWeb(new Request("http://local/x", { method, headers }))
    )
  const body = (response: HttpServerResponse.HttpServerResponse) =>
    response.body._tag === "Stream"
      ? Effect.map(Stream.mkString(Stream.decodeText(response.body.stream as Stream.Stream<Uint8Array>)), (s) => s)
      : Effect.succeed("")

  it.effect("tag the content, and honour ranges and If-None-Match like stored files", () =>
    Effect.gen(function*() {
      const whole = yield* ask({})
      assert.strictEqual(whole.status, 200)
      assert.strictEqual(yield* body(whole), "0123456789")
      const etag = whole.headers["etag"]
      assert.match(etag, /^"[A-Za-z0-9_-]{22}"$/)
      assert.strictEqual(whole.headers["last-modified"], undefined)
      const part = yield* ask({ range: "bytes=2-4" })
      assert.deepStrictEqual([part.status, part.headers["content-range"], yield* body(part)], [206, "bytes 2-4/10", "234"])
      assert.strictEqual((yield* ask({ "if-none-match": etag })).status, 304)
      assert.strictEqual((yield* ask({ range: "bytes=10-" })).status, 416)
      const other = yield* Effect.provideService(
        bytesFileResponse(new TextEncoder().encode("0123456780"), { mimeType: "image/png", fileName: null }),
        HttpServerRequest.HttpServerRequest,
        HttpServerRequest.fromWeb(new Request("http://local/x"))
      )
      assert.notStrictEqual(other.headers["etag"], etag)
    }))

  it.effect("stored files: a ranged read streams only those bytes", () =>
    Effect.gen(function*() {
      const store = BlobStore.make(tempDir())
      const path = store.newPath(1, "uploads", ".bin")
      yield* store.write(path, blob)
      const read = (range: { start: number; end: number }) =>
        Effect.map(Stream.runCollect(store.read(path, range)), (chunks) => new Uint8Array(Buffer.concat([...chunks])))
      assert.deepStrictEqual(yield* read({ start: 0, end: 0 }), blob.subarray(0, 1))
      assert.deepStrictEqual(yield* read({ start: 70000, end: 200000 }), blob.subarray(70000, 200001))
      assert.deepStrictEqual(yield* read({ start: blob.byteLength - 3, end: blob.byteLength - 1 }), blob.subarray(blob.byteLength - 3))
      const stat = yield* store.stat(path)
      assert.strictEqual(Option.map(stat, (s) => s.size).pipe(Option.getOrNull), blob.byteLength)
    }))
})

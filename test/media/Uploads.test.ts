import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { conversationOn, send } from "../messages/support.ts"
import { jpeg, png, svg, webp } from "../support/Images.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer, upload } from "../support/TestServer.ts"
import { filesUnder, probe, tempDir, tone } from "./support.ts"

let server: RunningServer
const storage = tempDir()
beforeAll(async () => {
  server = await startServer({ storageDir: storage })
})
afterAll(() => server?.close())

const stored = (path: string) => join(storage, ...path.split("/"))

const companyFiles = (companyId: number) => filesUnder(storage).filter((f) => f.startsWith(`c${companyId}/`))

const mediaRows = (companyId: number) =>
  query<{ id: number; type: string; mime_type: string; size: number; storage_path: string }>(
    server,
    "SELECT id, type, mime_type, size, storage_path FROM media WHERE company_id = $1 ORDER BY id",
    [companyId]
  )

describe("POST /v1/uploads", () => {
  it("streams image, video, audio and document files into the company's storage and answers flat", async () => {
    const company = await createCompany(server)
    const image = await png(64, 48)
    const res = await upload(server, company.token, "/v1/uploads", { bytes: image, name: "photo.png", type: "image/png" })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.data, undefined, "upload answers are flat")
    assert.strictEqual(res.body.type, "image")
    assert.strictEqual(res.body.mime_type, "image/png")
    assert.strictEqual(res.body.file_name, "photo.png")
    assert.strictEqual(res.body.size, image.byteLength)
    assert.match(res.body.storage_path, new RegExp(`^c${company.id}/uploads/[0-9a-f-]{36}\\.png$`))
    assert.deepStrictEqual(new Uint8Array(readFileSync(stored(res.body.storage_path))), image)

    const others = [
      { bytes: await jpeg(20, 20), name: "p.jpg", type: "image/jpeg", expected: "image" },
      { bytes: await webp(20, 20), name: "p.webp", type: "image/webp", expected: "image" },
      { bytes: tone("mp3"), name: "song.mp3", type: "audio/mpeg", expected: "audio" },
      // An ftyp box with the isom brand: what file-type recognises as MP4.
      { bytes: new Uint8Array([0, 0, 0, 24, ...new TextEncoder().encode("ftypisom"), 0, 0, 2, 0, ...new TextEncoder().encode("isomiso2")]), name: "clip.mp4", type: "video/mp4", expected: "video" },
      { bytes: new TextEncoder().encode("%PDF-1.4 fake"), name: "report.pdf", type: "application/pdf", expected: "document" },
      // A generic type falls back to the name's extension.
      { bytes: new TextEncoder().encode("a,b\n1,2\n"), name: "table.csv", type: "application/octet-stream", expected: "document" }
    ]
    for (const file of others) {
      const r = await upload(server, company.token, "/v1/uploads", file)
      assert.strictEqual(r.status, 201, `${file.name}: ${JSON.stringify(r.body)}`)
      assert.strictEqual(r.body.type, file.expected, file.name)
    }
    const rows = await mediaRows(company.id)
    assert.strictEqual(rows.length, 7)
    assert.strictEqual(rows.find((r) => r.storage_path.endsWith(".csv") || r.mime_type === "text/csv")?.mime_type, "text/csv")
    assert.strictEqual(res.body.media_id, rows[0].id)
  })

  it("refuses a JSON body, a form without `file` and an empty file with 422 on `file`", async () => {
    const company = await createCompany(server)
    const json = await request(server, "POST", "/v1/uploads", { token: company.token, body: { file: "x" } })
    assert.strictEqual(json.status, 422)
    assert.ok(Array.isArray(json.body.errors.file), JSON.stringify(json.body))
    const other = await upload(server, company.token, "/v1/uploads", { bytes: await png(2, 2), name: "a.png", type: "image/png", field: "photo" })
    assert.strictEqual(other.status, 422)
    assert.deepStrictEqual(other.body.errors.file, ["The file field is required."])
    const empty = await upload(server, company.token, "/v1/uploads", { bytes: new Uint8Array(0), name: "a.png", type: "image/png" })
    assert.strictEqual(empty.status, 422)
    assert.deepStrictEqual(empty.body.errors.file, ["The file must not be empty."])
    assert.deepStrictEqual(companyFiles(company.id), [])
    assert.deepStrictEqual(await mediaRows(company.id), [])
  })

  it("takes 64 MB exactly and refuses 64 MB + 1 byte without writing anything", async () => {
    const company = await createCompany(server)
    const limit = 64 * 1024 * 1024
    const exact = new Uint8Array(limit)
    exact[limit - 1] = 7
    const ok = await upload(server, company.token, "/v1/uploads", { bytes: exact, name: "big.bin", type: "application/octet-stream" })
    assert.strictEqual(ok.status, 201, JSON.stringify(ok.body))
    assert.strictEqual(ok.body.size, limit)
    const before = companyFiles(company.id)
    assert.strictEqual(before.length, 1)

    // The server answers as soon as the limit is passed and closes the connection: a client still
    // writing may see the reset before it reads the answer. Either way nothing may be stored.
    const over = await upload(server, company.token, "/v1/uploads", { bytes: new Uint8Array(limit + 1), name: "big.bin", type: "application/octet-stream" })
      .catch((error: unknown) => {
        assert.match(String((error as { cause?: unknown }).cause ?? error), /ECONNRESET|EPIPE|socket/)
        return undefined
      })
    if (over !== undefined) {
      assert.ok(over.status === 413 || over.status === 422, `status ${over.status}`)
      assert.match(over.body.message, /65536 kilobytes/)
    }
    assert.deepStrictEqual(companyFiles(company.id), before, "no partial file is left behind")
    assert.strictEqual((await mediaRows(company.id)).length, 1)
  })

  it("keeps each company's uploads to itself: another company's media_id is not a source (422)", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const up = await upload(server, a.token, "/v1/uploads", { bytes: await png(3, 3), name: "a.png", type: "image/png" })
    assert.ok(up.body.storage_path.startsWith(`c${a.id}/`))
    const c = await conversationOn(server, b.token)
    const res = await send(server, b.token, { channel_id: c.channelId, thread_id: c.threadId, attachments: [{ media_id: up.body.media_id }] })
    assert.strictEqual(res.status, 422)
    assert.strictEqual(res.body.error_code, "attachment_source_invalid")
    const inA = await request(server, "GET", `/v1/messages/${c.inboundId}/attachments`, { token: a.token })
    assert.strictEqual(inA.status, 404)
  })

  it("lets an agent upload, and wants a token", async () => {
    const company = await createCompany(server)
    const agent = await addUser(server, company.id, { role: "agent" })
    const login = await mobileLogin(server, agent.email, agent.password)
    const res = await upload(server, login.body.data.token, "/v1/uploads", { bytes: svg, name: "logo.svg", type: "image/svg+xml" })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.mime_type, "image/svg+xml")
    const anonymous = await fetch(`${server.url}/v1/uploads`, { method: "POST", body: new FormData(), headers: { accept: "application/json" } })
    assert.strictEqual(anonymous.status, 401)
  })
})

describe("POST /v1/uploads/voice", () => {
  const formats = [
    { format: "wav", type: "audio/wav" },
    { format: "mp3", type: "audio/mpeg" },
    { format: "webm", type: "audio/webm" },
    { format: "m4a", type: "audio/mp4" },
    { format: "ogg", type: "audio/ogg" }
  ] as const

  it("transcodes webm, ogg, m4a, mp3 and wav into mono Opus in Ogg that ffprobe reads back", async () => {
    const company = await createCompany(server)
    for (const { format, type } of formats) {
      const res = await upload(server, company.token, "/v1/uploads/voice", { bytes: tone(format, 2), name: `note.${format}`, type })
      assert.strictEqual(res.status, 201, `${format}: ${JSON.stringify(res.body)}`)
      assert.strictEqual(res.body.type, "voice")
      assert.strictEqual(res.body.mime_type, "audio/ogg")
      assert.strictEqual(res.body.file_name, "note.ogg")
      assert.match(res.body.storage_path, new RegExp(`^c${company.id}/voice/[0-9a-f-]{36}\\.ogg$`))
      assert.ok(Math.abs(res.body.duration - 2) < 0.1, `${format} duration ${res.body.duration}`)
      const info = probe(stored(res.body.storage_path))
      assert.strictEqual(info.format.format_name, "ogg", format)
      assert.strictEqual(info.streams.length, 1)
      assert.strictEqual(info.streams[0].codec_name, "opus", format)
      assert.strictEqual(info.streams[0].channels, 1)
    }
    // Only the transcoded notes are kept; the uploaded originals are gone.
    assert.deepStrictEqual(companyFiles(company.id).filter((f) => !f.startsWith(`c${company.id}/voice/`)), [])
  })

  it("refuses playlists, concat inputs, other types and undecodable audio with 422, keeping nothing", async () => {
    const company = await createCompany(server)
    const playlist = new TextEncoder().encode("#EXTM3U\n#EXT-X-VERSION:3\n#EXTINF:10,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n")
    const cases = [
      { bytes: playlist, name: "note.m3u8", type: "application/vnd.apple.mpegurl", message: /Playlists/ },
      // The same playlist under an accepted name and type: the bytes give it away.
      { bytes: playlist, name: "note.ogg", type: "audio/ogg", message: /Playlists/ },
      { bytes: new TextEncoder().encode("ffconcat version 1.0\nfile /etc/passwd\n"), name: "note.wav", type: "audio/wav", message: /Playlists/ },
      { bytes: tone("wav"), name: "concat:a.wav|b.wav", type: "audio/wav", message: /Playlists/ },
      { bytes: await png(10, 10), name: "note.png", type: "image/png", message: /must be a file of type/ },
      { bytes: tone("wav").subarray(0, 60), name: "note.wav", type: "audio/wav", message: /could not be transcoded|holds no audio/ },
      { bytes: new Uint8Array(4096).fill(0x41), name: "note.mp3", type: "audio/mpeg", message: /not audio/ }
    ]
    for (const c of cases) {
      const res = await upload(server, company.token, "/v1/uploads/voice", c)
      assert.strictEqual(res.status, 422, `${c.name}: ${JSON.stringify(res.body)}`)
      assert.match(res.body.errors.file[0], c.message, c.name)
    }
    assert.deepStrictEqual(companyFiles(company.id), [])
    assert.deepStrictEqual(await mediaRows(company.id), [])
  })

  it("refuses more than 32 MB", async () => {
    const company = await createCompany(server)
    const res = await upload(server, company.token, "/v1/uploads/voice", {
      bytes: new Uint8Array(32 * 1024 * 1024 + 1),
      name: "long.wav",
      type: "audio/wav"
    })
    assert.ok(res.status === 413 || res.status === 422, `status ${res.status}`)
    assert.match(res.body.message, /32768 kilobytes/)
    assert.deepStrictEqual(companyFiles(company.id), [])
  })
})

describe("FFMPEG_PATH", () => {
  it("is used when set: a broken binary makes every voice upload a 422", async () => {
    const dir = mkdtempSync(join(tmpdir(), "crm-ffmpeg-"))
    const fake = join(dir, "ffmpeg")
    writeFileSync(fake, "#!/bin/sh\nexit 1\n", { mode: 0o755 })
    const other = await startServer({ storageDir: tempDir(), ffmpegPath: Option.some(fake) })
    try {
      const company = await createCompany(other)
      const res = await upload(other, company.token, "/v1/uploads/voice", { bytes: tone("wav"), name: "n.wav", type: "audio/wav" })
      assert.strictEqual(res.status, 422)
      assert.match(res.body.message, /could not be transcoded/)
    } finally {
      await other.close()
    }
  })
})

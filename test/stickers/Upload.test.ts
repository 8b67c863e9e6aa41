import { assert, describe, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import sharp from "sharp"
import { afterAll, beforeAll } from "vitest"
import * as images from "../support/Images.ts"
import { query } from "../support/Sql.ts"
import { createCompany, getLink, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { createPack, listPacks, uploadStickers } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const stickerRows = (companyId: number) =>
  query<{ n: number }>(server, "SELECT count(*)::int AS n FROM stickers WHERE company_id = $1", [companyId]).then((r) => r[0].n)

describe("POST /v1/sticker-packs/{pack}/stickers", () => {
  it("converts PNG, JPEG and WebP to static 512x512 WebP and skips the bad files without dropping the good ones", async () => {
    const company = await createCompany(server)
    const pack = await createPack(server, company.token)
    const oversized = Buffer.concat([await images.png(64, 64), randomBytes(5 * 1024 * 1024)])
    const res = await uploadStickers(server, company.token, pack.id, [
      { name: "wide.png", bytes: await images.png(800, 600), type: "image/png" },
      { name: "flood.png", bytes: await images.pixelFlood(), type: "image/png" },
      { name: "tall.jpg", bytes: await images.jpeg(300, 900), type: "image/jpeg" },
      { name: "broken.png", bytes: await images.truncated(), type: "image/png" },
      { name: "notes.png", bytes: images.text, type: "image/png" },
      { name: "vector.svg", bytes: images.svg, type: "image/svg+xml" },
      { name: "big.png", bytes: oversized, type: "image/png" },
      // A WebP sent as octet-stream with a misleading name: the bytes decide.
      { name: "photo.jpeg", bytes: await images.webp(512, 384) }
    ])
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    const { created, skipped } = res.body.data
    assert.deepStrictEqual(skipped, [
      { filename: "flood.png", reason: "too_many_pixels" },
      { filename: "broken.png", reason: "unreadable_image" },
      { filename: "notes.png", reason: "unsupported_format" },
      { filename: "vector.svg", reason: "unsupported_format" },
      { filename: "big.png", reason: "file_too_large" }
    ])
    assert.strictEqual(created.length, 3)
    assert.deepStrictEqual(created.map((s: any) => s.position), [0, 1, 2])
    for (const sticker of created) {
      assert.deepStrictEqual(
        [sticker.pack_id, sticker.width, sticker.height, sticker.is_animated, sticker.emoji_tags],
        [pack.id, 512, 512, false, []]
      )
      const file = await getLink(server, sticker.url)
      assert.strictEqual(file.status, 200)
      assert.strictEqual(file.bytes.length, sticker.size)
      assert.ok(sticker.size <= 100 * 1024, `size ${sticker.size}`)
      const meta = await sharp(file.bytes).metadata()
      assert.deepStrictEqual([meta.format, meta.width, meta.height, meta.pages ?? 1, meta.hasAlpha], ["webp", 512, 512, 1, true])
    }
    // `contain` on a transparent canvas: a 300x900 picture leaves the left and right edges clear.
    const tall = await sharp((await getLink(server, created[1].url)).bytes).ensureAlpha().raw().toBuffer({ resolveWithObject: true })
    const alphaAt = (x: number, y: number) => tall.data[(y * 512 + x) * 4 + 3]
    assert.deepStrictEqual([alphaAt(2, 256), alphaAt(509, 256), alphaAt(256, 256)], [0, 0, 255])
    assert.strictEqual(await stickerRows(company.id), 3)
  })

  it("keeps a photo-like image under 100 KB by lowering the quality", async () => {
    const company = await createCompany(server)
    const pack = await createPack(server, company.token)
    const noise = await images.noise(1024)
    const plain = await sharp(await images.noise(1024)).resize(512, 512).webp({ quality: 90 }).toBuffer()
    assert.ok(plain.length > 100 * 1024, `the first quality step alone gives ${plain.length} bytes`)
    const res = await uploadStickers(server, company.token, pack.id, [{ name: "noise.png", bytes: noise }])
    assert.strictEqual(res.status, 200)
    assert.strictEqual(res.body.data.created.length, 1)
    const sticker = res.body.data.created[0]
    assert.ok(sticker.size <= 100 * 1024 && sticker.size > 20 * 1024, `size ${sticker.size}`)
    const file = await getLink(server, sticker.url)
    assert.strictEqual(file.bytes.length, sticker.size)
  })

  it("answers 200 with everything skipped when no file is usable", async () => {
    const company = await createCompany(server)
    const pack = await createPack(server, company.token)
    const res = await uploadStickers(server, company.token, pack.id, [{ name: "a.txt", bytes: images.text }])
    assert.deepStrictEqual([res.status, res.body.data], [200, { created: [], skipped: [{ filename: "a.txt", reason: "unsupported_format" }] }])
  })

  it("needs 1 to 120 files and creates nothing when there are more", async () => {
    const company = await createCompany(server)
    const pack = await createPack(server, company.token)
    const json = await request(server, "POST", `/v1/sticker-packs/${pack.id}/stickers`, { token: company.token, body: {} })
    assert.strictEqual(json.status, 422)
    assert.ok(json.body.errors.files)
    const none = await uploadStickers(server, company.token, pack.id, [{ name: "a.png", bytes: await images.png() }], "other")
    assert.deepStrictEqual([none.status, none.body.errors.files], [422, ["The files field is required."]])

    const tiny = await images.png(16, 16)
    const many = Array.from({ length: 121 }, (_, i) => ({ name: `s${i}.png`, bytes: tiny, type: "image/png" }))
    const tooMany = await uploadStickers(server, company.token, pack.id, many)
    assert.strictEqual(tooMany.status, 422)
    assert.deepStrictEqual(tooMany.body.errors.files, ["The files field must not have more than 120 items."])
    assert.strictEqual(await stickerRows(company.id), 0)

    // `files` without brackets is accepted as the same field.
    const plainKey = await uploadStickers(server, company.token, pack.id, [{ name: "a.png", bytes: tiny }], "files")
    assert.strictEqual(plainKey.body.data.created.length, 1)
  })

  it("takes exactly 120 files in one batch", async () => {
    const company = await createCompany(server)
    const pack = await createPack(server, company.token)
    const tiny = await images.png(16, 16)
    const res = await uploadStickers(server, company.token, pack.id, Array.from({ length: 120 }, (_, i) => ({ name: `s${i}.png`, bytes: tiny })))
    assert.strictEqual(res.status, 200)
    assert.strictEqual(res.body.data.created.length, 120)
    const [listed] = await listPacks(server, company.token)
    assert.strictEqual(listed.stickers_count, 120)
  })

  it("answers 404 for a missing or foreign pack before reading the files", async () => {
    const owner = await createCompany(server)
    const other = await createCompany(server)
    const pack = await createPack(server, owner.token)
    const foreign = await uploadStickers(server, other.token, pack.id, [{ name: "a.png", bytes: await images.png() }])
    assert.deepStrictEqual([foreign.status, foreign.body.message], [404, "Sticker pack not found."])
    const missing = await uploadStickers(server, owner.token, 999999999, [{ name: "a.png", bytes: await images.png() }])
    assert.strictEqual(missing.status, 404)
    assert.strictEqual(await stickerRows(owner.id), 0)
  })
})

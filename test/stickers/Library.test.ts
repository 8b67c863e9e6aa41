import { assert, describe, it } from "@effect/vitest"
import sharp from "sharp"
import { afterAll, beforeAll } from "vitest"
import * as images from "../support/Images.ts"
import { query } from "../support/Sql.ts"
import { createCompany, getLink, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { createPack, listPacks, member, uploadStickers } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const packOf = async (token: string, id: number) => (await listPacks(server, token)).find((p) => p.id === id)

const oneSticker = async (token: string, packId: number) => {
  const res = await uploadStickers(server, token, packId, [{ name: "one.png", bytes: await images.png(), type: "image/png" }])
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.created[0] as { id: number; url: string; pack_id: number; position: number }
}

describe("sticker packs", () => {
  it("creates packs with {message, pack}, lists them with nested stickers in position order", async () => {
    const company = await createCompany(server)
    const res = await request(server, "POST", "/v1/sticker-packs", { token: company.token, body: { name: "  Cats  ", tray_emoji: "🐱" } })
    assert.strictEqual(res.status, 201)
    assert.strictEqual(res.body.data.message, "Sticker pack created.")
    const cats = res.body.data.pack
    assert.deepStrictEqual({ ...cats, id: 0 }, {
      id: 0,
      name: "Cats",
      is_system: false,
      source: "manual",
      tray_emoji: "🐱",
      position: 0,
      stickers_count: 0,
      stickers: []
    })
    const dogs = await createPack(server, company.token, { name: "Dogs" })
    assert.strictEqual(dogs.position, 1)
    await oneSticker(company.token, dogs.id)
    await oneSticker(company.token, dogs.id)

    const packs = await listPacks(server, company.token)
    assert.deepStrictEqual(packs.map((p) => [p.name, p.stickers_count, p.stickers.length]), [["Cats", 0, 0], ["Dogs", 2, 2]])
    assert.deepStrictEqual(packs[1].stickers.map((s: any) => s.position), [0, 1])
    assert.strictEqual(packs[1].tray_emoji, null)
  })

  it("refuses a blank name and a tray emoji that is not an emoji", async () => {
    const company = await createCompany(server)
    const blank = await request(server, "POST", "/v1/sticker-packs", { token: company.token, body: { name: "   " } })
    assert.strictEqual(blank.status, 422)
    assert.deepStrictEqual(Object.keys(blank.body.errors), ["name"])
    const word = await request(server, "POST", "/v1/sticker-packs", { token: company.token, body: { name: "x", tray_emoji: "cat" } })
    assert.strictEqual(word.status, 422)
    assert.deepStrictEqual(word.body.errors.tray_emoji, ["The tray emoji field must be an emoji."])
    for (const emoji of ["👍🏽", "🇺🇦", "1️⃣", "👨‍👩‍👧"]) {
      const ok = await request(server, "POST", "/v1/sticker-packs", { token: company.token, body: { name: "x", tray_emoji: emoji } })
      assert.strictEqual(ok.status, 201, emoji)
    }
    assert.strictEqual((await listPacks(server, company.token)).length, 4)
  })

  it("updates name, tray emoji and position through POST /v1/sticker-packs/{pack}", async () => {
    const company = await createCompany(server)
    const a = await createPack(server, company.token, { name: "A", tray_emoji: "🔥" })
    const b = await createPack(server, company.token, { name: "B" })
    const res = await request(server, "POST", `/v1/sticker-packs/${a.id}`, {
      token: company.token,
      body: { name: "Alpha", tray_emoji: "⭐", position: 5 }
    })
    assert.strictEqual(res.status, 200)
    assert.strictEqual(res.body.data.message, "Sticker pack updated.")
    assert.deepStrictEqual([res.body.data.pack.name, res.body.data.pack.tray_emoji, res.body.data.pack.position], ["Alpha", "⭐", 5])
    assert.deepStrictEqual((await listPacks(server, company.token)).map((p) => p.id), [b.id, a.id])

    const cleared = await request(server, "POST", `/v1/sticker-packs/${a.id}`, { token: company.token, body: { tray_emoji: null } })
    assert.deepStrictEqual([cleared.body.data.pack.name, cleared.body.data.pack.tray_emoji], ["Alpha", null])
    const bad = await request(server, "POST", `/v1/sticker-packs/${a.id}`, { token: company.token, body: { position: -1 } })
    assert.strictEqual(bad.status, 422)
    assert.ok(bad.body.errors.position)
  })

  it("deletes a pack with its stickers: gone from the list, their files no longer served", async () => {
    const company = await createCompany(server)
    const pack = await createPack(server, company.token)
    const sticker = await oneSticker(company.token, pack.id)
    assert.strictEqual((await getLink(server, sticker.url)).status, 200)

    const res = await request(server, "DELETE", `/v1/sticker-packs/${pack.id}`, { token: company.token })
    assert.deepStrictEqual([res.status, res.body], [200, { data: { message: "Sticker pack deleted." } }])
    assert.deepStrictEqual(await listPacks(server, company.token), [])
    const file = await getLink(server, sticker.url)
    assert.strictEqual(file.status, 404)
    const [row] = await query<{ deleted: boolean }>(server, "SELECT deleted_at IS NOT NULL AS deleted FROM stickers WHERE id = $1", [sticker.id])
    assert.strictEqual(row.deleted, true)
    const again = await request(server, "DELETE", `/v1/sticker-packs/${pack.id}`, { token: company.token })
    assert.deepStrictEqual([again.status, again.body.message], [404, "Sticker pack not found."])
    const patch = await request(server, "PATCH", `/v1/stickers/${sticker.id}`, { token: company.token, body: { position: 1 } })
    assert.deepStrictEqual([patch.status, patch.body.message], [404, "Sticker not found."])
  })
})

describe("stickers", () => {
  it("PATCH sets emoji tags and position, and moves a sticker to the end of another pack", async () => {
    const company = await createCompany(server)
    const from = await createPack(server, company.token, { name: "From" })
    const to = await createPack(server, company.token, { name: "To" })
    const first = await oneSticker(company.token, from.id)
    await oneSticker(company.token, to.id)
    await oneSticker(company.token, to.id)

    const tagged = await request(server, "PATCH", `/v1/stickers/${first.id}`, {
      token: company.token,
      body: { emoji_tags: ["😀", "👍🏽"], position: 7 }
    })
    assert.strictEqual(tagged.status, 200)
    assert.strictEqual(tagged.body.data.message, "Sticker updated.")
    assert.deepStrictEqual([tagged.body.data.sticker.emoji_tags, tagged.body.data.sticker.position], [["😀", "👍🏽"], 7])

    const moved = await request(server, "PATCH", `/v1/stickers/${first.id}`, { token: company.token, body: { sticker_pack_id: to.id } })
    assert.strictEqual(moved.status, 200)
    assert.deepStrictEqual([moved.body.data.sticker.pack_id, moved.body.data.sticker.position], [to.id, 2])
    assert.deepStrictEqual(moved.body.data.sticker.emoji_tags, ["😀", "👍🏽"])
    assert.strictEqual((await packOf(company.token, from.id)).stickers_count, 0)
    assert.deepStrictEqual((await packOf(company.token, to.id)).stickers.map((s: any) => s.id).at(-1), first.id)
    // The link does not change with the pack.
    assert.strictEqual((await getLink(server, moved.body.data.sticker.url)).status, 200)

    const badTag = await request(server, "PATCH", `/v1/stickers/${first.id}`, { token: company.token, body: { emoji_tags: ["nope"] } })
    assert.strictEqual(badTag.status, 422)
    assert.ok(badTag.body.errors["emoji_tags.0"])
  })

  it("soft-deletes a sticker: the row stays, the list and the file link hide it", async () => {
    const company = await createCompany(server)
    const pack = await createPack(server, company.token)
    const sticker = await oneSticker(company.token, pack.id)
    const res = await request(server, "DELETE", `/v1/stickers/${sticker.id}`, { token: company.token })
    assert.deepStrictEqual([res.status, res.body], [200, { data: { message: "Sticker deleted." } }])
    assert.strictEqual((await packOf(company.token, pack.id)).stickers_count, 0)
    const file = await getLink(server, sticker.url)
    assert.deepStrictEqual([file.status, JSON.parse(new TextDecoder().decode(file.bytes)).message], [404, "Sticker not found."])
    const [row] = await query<{ deleted: boolean; storage_path: string }>(
      server,
      "SELECT deleted_at IS NOT NULL AS deleted, storage_path FROM stickers WHERE id = $1",
      [sticker.id]
    )
    assert.strictEqual(row.deleted, true)
    assert.match(row.storage_path, new RegExp(`^c${company.id}/stickers/`))
    const again = await request(server, "DELETE", `/v1/stickers/${sticker.id}`, { token: company.token })
    assert.strictEqual(again.status, 404)
  })

  it("serves the file from a permanent signed link without Authorization, and nothing without a valid signature", async () => {
    const company = await createCompany(server)
    const pack = await createPack(server, company.token)
    const sticker = await oneSticker(company.token, pack.id)
    const url = new URL(sticker.url)
    assert.strictEqual(url.pathname, `/v1/stickers/${sticker.id}/file`)
    assert.strictEqual(url.searchParams.get("expires"), null)
    const local = `${server.url}${url.pathname}${url.search}`

    const ok = await getLink(server, local)
    assert.strictEqual(ok.status, 200)
    assert.strictEqual(ok.headers.get("content-type"), "image/webp")
    const meta = await sharp(ok.bytes).metadata()
    assert.deepStrictEqual([meta.format, meta.width, meta.height], ["webp", 512, 512])

    const tampered = new URL(local)
    tampered.searchParams.set("signature", `${url.searchParams.get("signature")!.slice(0, -2)}xx`)
    assert.strictEqual((await getLink(server, tampered.toString())).status, 403)
    const unsigned = new URL(local)
    unsigned.searchParams.delete("signature")
    assert.strictEqual((await getLink(server, unsigned.toString())).status, 403)
    // The signature covers the company: a link re-pointed at another tenant is refused.
    const other = await createCompany(server)
    const moved = new URL(local)
    moved.searchParams.set("c", String(other.id))
    assert.strictEqual((await getLink(server, moved.toString())).status, 403)
    // Another sticker id under the same signature is refused too.
    const swapped = `${server.url}/v1/stickers/${sticker.id + 1}/file${url.search}`
    assert.strictEqual((await getLink(server, swapped)).status, 403)
  })
})

describe("permissions and tenancy", () => {
  it("lets an agent view and create, but not update or delete; a manager may", async () => {
    const company = await createCompany(server)
    const agent = await member(server, company.id, "agent")
    const manager = await member(server, company.id, "manager")
    const pack = await createPack(server, agent.token, { name: "Agent's" })
    const sticker = await oneSticker(agent.token, pack.id)
    assert.strictEqual((await listPacks(server, agent.token)).length, 1)

    const denied = [
      await request(server, "POST", `/v1/sticker-packs/${pack.id}`, { token: agent.token, body: { name: "x" } }),
      await request(server, "PATCH", `/v1/stickers/${sticker.id}`, { token: agent.token, body: { position: 3 } }),
      await request(server, "DELETE", `/v1/stickers/${sticker.id}`, { token: agent.token }),
      await request(server, "DELETE", `/v1/sticker-packs/${pack.id}`, { token: agent.token })
    ]
    assert.deepStrictEqual(denied.map((r) => r.status), [403, 403, 403, 403])
    assert.strictEqual((await packOf(company.token, pack.id)).stickers_count, 1)

    const allowed = [
      await request(server, "POST", `/v1/sticker-packs/${pack.id}`, { token: manager.token, body: { name: "x" } }),
      await request(server, "PATCH", `/v1/stickers/${sticker.id}`, { token: manager.token, body: { position: 3 } }),
      await request(server, "DELETE", `/v1/stickers/${sticker.id}`, { token: manager.token }),
      await request(server, "DELETE", `/v1/sticker-packs/${pack.id}`, { token: manager.token })
    ]
    assert.deepStrictEqual(allowed.map((r) => r.status), [200, 200, 200, 200])
    const me = await request(server, "GET", "/v1/me", { token: agent.token })
    const stickerPermissions = (me.body.data.permissions as Array<string>).filter((p) => p.startsWith("sticker."))
    assert.sameMembers(stickerPermissions, ["sticker.view", "sticker.create"])
  })

  it("answers 404 for another company's pack and sticker, and never shows them", async () => {
    const owner = await createCompany(server)
    const stranger = await createCompany(server)
    const pack = await createPack(server, owner.token, { name: "Private" })
    const sticker = await oneSticker(owner.token, pack.id)
    const t = stranger.token
    const packCalls = [
      await request(server, "POST", `/v1/sticker-packs/${pack.id}`, { token: t, body: { name: "mine" } }),
      await request(server, "DELETE", `/v1/sticker-packs/${pack.id}`, { token: t }),
      await uploadStickers(server, t, pack.id, [{ name: "a.png", bytes: await images.png() }]),
      await request(server, "POST", `/v1/sticker-packs/${pack.id}/stickers/from-message`, { token: t, body: { message_id: 1, attachment_id: 1 } })
    ]
    assert.deepStrictEqual(packCalls.map((r) => [r.status, r.body.message]), Array(4).fill([404, "Sticker pack not found."]))
    const stickerCalls = [
      await request(server, "PATCH", `/v1/stickers/${sticker.id}`, { token: t, body: { position: 1 } }),
      await request(server, "DELETE", `/v1/stickers/${sticker.id}`, { token: t })
    ]
    assert.deepStrictEqual(stickerCalls.map((r) => [r.status, r.body.message]), Array(2).fill([404, "Sticker not found."]))
    // Moving one's own sticker into a foreign pack is a bad field, not a way in.
    const mine = await createPack(server, t)
    const own = await oneSticker(t, mine.id)
    const move = await request(server, "PATCH", `/v1/stickers/${own.id}`, { token: t, body: { sticker_pack_id: pack.id } })
    assert.strictEqual(move.status, 422)
    assert.deepStrictEqual(move.body.errors.sticker_pack_id, ["The selected sticker pack id is invalid."])

    assert.deepStrictEqual((await listPacks(server, t)).map((p) => p.id), [mine.id])
    const untouched = await packOf(owner.token, pack.id)
    assert.deepStrictEqual([untouched.name, untouched.stickers_count], ["Private", 1])
  })
})

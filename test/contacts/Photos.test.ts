import { assert, describe, it } from "@effect/vitest"
import { rmSync } from "node:fs"
import sharp from "sharp"
import { afterAll } from "vitest"
import { SignedUrls } from "../../src/platform/files/SignedUrls.ts"
import { FakeHttp } from "../fakes/FakeHttp.ts"
import { tempDir } from "../media/support.ts"
import { fileServer } from "../support/FileServer.ts"
import { jpeg, png } from "../support/Images.ts"
import { createCompany, getLink, request, startServer, upload } from "../support/TestServer.ts"
import { createContact } from "./support.ts"

const storageDir = tempDir("crm-photos-")
afterAll(() => rmSync(storageDir, { recursive: true, force: true }))
/** The hosts of profile pictures: a path in `served` answers its bytes, any other 404. */
const served = new Map<string, { bytes: Uint8Array; type: string }>()
const pictures = new FakeHttp(
  (r) => r.path,
  (r) => {
    const found = served.get(r.path)
    return found === undefined ? { status: 404, body: "" } : { status: 200, bytes: found.bytes, contentType: found.type }
  }
)
const server = fileServer(() => ({ storageDir, photoFetchAllowPrivate: true }), [pictures])

const uploadImage = async (token: string, bytes: Uint8Array, name = "face.png", type = "image/png") => {
  const res = await upload(server, token, "/v1/uploads", { bytes, name, type })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.media_id as number
}

const widthOf = async (bytes: Uint8Array) => (await sharp(bytes).metadata()).width

describe("contact photos", () => {
  it("serves a WebP preview 256 px wide for a wider photo, the same on every request", async () => {
    const company = await createCompany(server)
    const mediaId = await uploadImage(company.token, await png(600, 300))
    const contact = await createContact(server, company.token, { firstName: "Face", photo_media_id: mediaId })
    assert.ok(typeof contact.photo_url === "string" && contact.photo_url.includes(`/v1/contacts/${contact.id}/photo?`), contact.photo_url)
    assert.ok(contact.photo_url.includes("signature="))

    const first = await getLink(server, contact.photo_url)
    assert.strictEqual(first.status, 200)
    assert.strictEqual(first.headers.get("content-type"), "image/webp")
    const meta = await sharp(first.bytes).metadata()
    assert.deepStrictEqual([meta.format, meta.width, meta.height], ["webp", 256, 128])
    const second = await getLink(server, contact.photo_url)
    assert.deepStrictEqual(second.bytes, first.bytes)
  })

  it("serves the original of a photo at most 256 px wide, and clears the photo with null", async () => {
    const company = await createCompany(server)
    const small = await jpeg(200, 400)
    const mediaId = await uploadImage(company.token, small, "small.jpg", "image/jpeg")
    const contact = await createContact(server, company.token, { firstName: "Small" })
    assert.strictEqual(contact.photo_url, null)
    const patched = await request(server, "PATCH", `/v1/contacts/${contact.id}`, { token: company.token, body: { photo_media_id: mediaId } })
    assert.strictEqual(patched.status, 200, JSON.stringify(patched.body))
    const res = await getLink(server, patched.body.data.photo_url)
    assert.deepStrictEqual([res.status, res.headers.get("content-type")], [200, "image/jpeg"])
    assert.deepStrictEqual(res.bytes, small)

    const cleared = await request(server, "PATCH", `/v1/contacts/${contact.id}`, { token: company.token, body: { photo_media_id: null } })
    assert.strictEqual(cleared.body.data.photo_url, null)
    // The old link now finds no photo.
    assert.strictEqual((await getLink(server, patched.body.data.photo_url)).status, 404)
  })

  it("falls back to the newest linked account's profile picture", async () => {
    const company = await createCompany(server)
    served.set(`/wide-${company.id}.jpg`, { bytes: await jpeg(800, 800), type: "image/jpeg" })
    served.set(`/narrow-${company.id}.png`, { bytes: await png(64, 64), type: "image/png" })
    served.set(`/text-${company.id}`, { bytes: new TextEncoder().encode("<html>not an image</html>"), type: "text/html" })
    const wide = await createContact(server, company.token, {
      contactAccounts: [{ channel_type: "msgr_b", external_id: `w${company.id}`, profile_picture: `${pictures.url}/wide-${company.id}.jpg` }]
    })
    const preview = await getLink(server, wide.photo_url)
    assert.deepStrictEqual([preview.status, preview.headers.get("content-type"), await widthOf(preview.bytes)], [200, "image/webp", 256])

    const narrow = await createContact(server, company.token, {
      contactAccounts: [
        { channel_type: "msgr_b", external_id: `n${company.id}`, profile_picture: `${pictures.url}/missing.png` },
        { channel_type: "msgr_a", external_id: `n${company.id}`, profile_picture: `${pictures.url}/narrow-${company.id}.png` }
      ]
    })
    const original = await getLink(server, narrow.photo_url)
    assert.deepStrictEqual([original.status, original.headers.get("content-type")], [200, "image/png"])
    assert.deepStrictEqual(original.bytes, served.get(`/narrow-${company.id}.png`)!.bytes)

    // A picture URL that is not an image is never proxied.
    const text = await createContact(server, company.token, {
      contactAccounts: [{ channel_type: "msgr_b", external_id: `t${company.id}`, profile_picture: `${pictures.url}/text-${company.id}` }]
    })
    const refused = await getLink(server, text.photo_url)
    assert.strictEqual(refused.status, 404)
  })

  it("refuses a photo that is not an image upload of the company", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const doc = await upload(server, company.token, "/v1/uploads", { bytes: new TextEncoder().encode("%PDF-1.4"), name: "a.pdf", type: "application/pdf" })
    assert.strictEqual(doc.status, 201, JSON.stringify(doc.body))
    const foreign = await uploadImage(other.token, await png(10, 10))
    for (const mediaId of [doc.body.media_id, foreign, 999_999_999]) {
      const res = await request(server, "POST", "/v1/contacts", { token: company.token, body: { firstName: "X", photo_media_id: mediaId } })
      assert.deepStrictEqual([res.status, Object.keys(res.body.errors ?? {})], [422, ["photo_media_id"]], String(mediaId))
    }
  })

  it("needs a valid signature, and a link made for another company finds no contact", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const mediaId = await uploadImage(company.token, await png(300, 300))
    const contact = await createContact(server, company.token, { firstName: "Signed", photo_media_id: mediaId })
    const url = new URL(contact.photo_url)
    const tampered = url.pathname + url.search.replace(/signature=[^&]+/, "signature=AAAA")
    const forged = await request(server, "GET", tampered)
    assert.deepStrictEqual([forged.status, forged.body], [403, { message: "Invalid signature." }])
    assert.strictEqual((await request(server, "GET", url.pathname)).status, 403)
    // Changing the company in the query breaks the signature; a genuinely signed link for the other company is a 404.
    assert.strictEqual((await request(server, "GET", url.pathname + url.search.replace(`c=${company.id}`, `c=${other.id}`))).status, 403)
    const crossLink = await server.runInApp(SignedUrls.useSync((s) => s.sign(`/v1/contacts/${contact.id}/photo`, { params: { c: String(other.id), v: "1" } })))
    const cross = await getLink(server, crossLink)
    assert.strictEqual(cross.status, 404)
    const noPhoto = await createContact(server, company.token, { firstName: "Plain" })
    const noLink = await server.runInApp(SignedUrls.useSync((s) => s.sign(`/v1/contacts/${noPhoto.id}/photo`, { params: { c: String(company.id), v: "1" } })))
    const none = await request(server, "GET", new URL(noLink).pathname + new URL(noLink).search)
    assert.deepStrictEqual([none.status, none.body], [404, { message: "Photo not found." }])
  })
})

describe("contact photos from private hosts", () => {
  it("does not fetch a picture from a loopback or private address by default", async () => {
    const guarded = await startServer({ storageDir })
    try {
      const company = await createCompany(guarded)
      served.set(`/guarded-${company.id}.png`, { bytes: await png(64, 64), type: "image/png" })
      const res = await request(guarded, "POST", "/v1/contacts", {
        token: company.token,
        body: { contactAccounts: [{ channel_type: "msgr_b", external_id: "g", profile_picture: `${pictures.url}/guarded-${company.id}.png` }] }
      })
      assert.strictEqual(res.status, 201, JSON.stringify(res.body))
      const photo = await getLink(guarded, res.body.data.photo_url)
      assert.strictEqual(photo.status, 404)
    } finally {
      await guarded.close()
    }
  })
})

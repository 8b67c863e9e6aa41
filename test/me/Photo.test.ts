import { assert, describe, it } from "@effect/vitest"
import { rmSync } from "node:fs"
import sharp from "sharp"
import { afterAll, beforeAll } from "vitest"
import { SignedUrls } from "../../src/platform/files/SignedUrls.ts"
import { addUser } from "../auth/support.ts"
import { tempDir } from "../media/support.ts"
import { jpeg, png } from "../support/Images.ts"
import { createCompany, getLink, request, type RunningServer, startServer, upload } from "../support/TestServer.ts"
import { call, type Caller, mobileCaller } from "./support.ts"

let server: RunningServer
let storageDir: string
beforeAll(async () => {
  storageDir = tempDir("crm-user-photos-")
  server = await startServer({ storageDir })
})
afterAll(async () => {
  await server?.close()
  rmSync(storageDir, { recursive: true, force: true })
})

/** A company with one agent signed in on a mobile token. */
const agent = async () => {
  const company = await createCompany(server)
  const user = await addUser(server, company.id, { role: "agent" })
  const caller = await mobileCaller(server, user.email, user.password)
  return { company, user, caller, token: (caller as { token: string }).token }
}

const uploadImage = async (token: string, bytes: Uint8Array, name = "me.png", type = "image/png") => {
  const res = await upload(server, token, "/v1/uploads", { bytes, name, type })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.media_id as number
}

const setPhoto = async (caller: Caller, mediaId: number | null) => {
  const res = await call(server, caller, "POST", "/v1/me", { photo_media_id: mediaId })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.photo_url as string | null
}

const profileUrl = async (caller: Caller) => {
  const res = await call(server, caller, "GET", "/v1/me")
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.photo_url as string | null
}

/** `photo_url` of a user in `GET /v1/users` and in the members list, as a colleague (the company's admin token) sees them. */
const listedUrls = async (token: string, userId: number) => {
  const users = await request(server, "GET", "/v1/users", { token })
  const members = await request(server, "GET", "/v1/companies/current/members", { token })
  assert.strictEqual(users.status, 200, JSON.stringify(users.body))
  assert.strictEqual(members.status, 200, JSON.stringify(members.body))
  const fromUsers = users.body.data.find((u: { id: number }) => u.id === userId)
  const fromMembers = members.body.data.find((m: { id: number }) => m.id === userId)
  return [fromUsers.photo_url, fromMembers.photo_url]
}

const signedLink = (userId: number, companyId: number) =>
  server.runInApp(SignedUrls.useSync((s) => s.sign(`/v1/users/${userId}/photo`, { params: { c: String(companyId), v: "1" } })))

const pathOf = (link: string) => new URL(link).pathname + new URL(link).search

describe("user photo", () => {
  it("sets the photo from an image upload; the signed link answers a 256 px WebP preview of a wider image", async () => {
    const { company, user, caller, token } = await agent()
    assert.strictEqual(await profileUrl(caller), null)
    assert.deepStrictEqual(await listedUrls(company.token, user.id), [null, null])

    const url = await setPhoto(caller, await uploadImage(token, await png(600, 300)))
    assert.ok(url !== null && url.includes(`/v1/users/${user.id}/photo?`), String(url))
    const params = new URL(url).searchParams
    assert.deepStrictEqual([params.get("c"), params.has("v"), params.has("signature")], [String(company.id), true, true])
    assert.strictEqual(await profileUrl(caller), url)
    // Colleagues get the same link in the users list and the members list.
    assert.deepStrictEqual(await listedUrls(company.token, user.id), [url, url])

    const res = await getLink(server, url)
    assert.deepStrictEqual([res.status, res.headers.get("content-type")], [200, "image/webp"])
    const meta = await sharp(res.bytes).metadata()
    assert.deepStrictEqual([meta.format, meta.width, meta.height], ["webp", 256, 128])
    // No Authorization header was sent: the signature is the authorization.
    assert.deepStrictEqual((await getLink(server, url)).bytes, res.bytes)
  })

  it("serves a photo at most 256 px wide as the original; a new photo gets a new link, null clears it", async () => {
    const { company, user, caller, token } = await agent()
    const small = await jpeg(200, 400)
    const first = await setPhoto(caller, await uploadImage(token, small, "small.jpg", "image/jpeg"))
    const original = await getLink(server, first!)
    assert.deepStrictEqual([original.status, original.headers.get("content-type")], [200, "image/jpeg"])
    assert.deepStrictEqual(original.bytes, small)

    const next = await png(120, 120)
    const nextId = await uploadImage(token, next)
    const second = await setPhoto(caller, nextId)
    assert.ok(second !== null && second !== first, "a new photo has a new link")
    assert.deepStrictEqual((await getLink(server, second)).bytes, next)
    // An older link of the same user stays valid and shows the current photo.
    const old = await getLink(server, first!)
    assert.deepStrictEqual([old.status, old.headers.get("content-type"), old.bytes], [200, "image/png", next])
    // The same upload again is the same photo: the link does not change.
    assert.strictEqual(await setPhoto(caller, nextId), second)

    assert.strictEqual(await setPhoto(caller, null), null)
    assert.strictEqual(await profileUrl(caller), null)
    assert.deepStrictEqual(await listedUrls(company.token, user.id), [null, null])
    const gone = await request(server, "GET", pathOf(second))
    assert.deepStrictEqual([gone.status, gone.body], [404, { message: "Photo not found." }])
  })

  it("refuses a media id that is not an image upload of the active company with 422 on photo_media_id; the photo stays", async () => {
    const { caller, token } = await agent()
    const other = await createCompany(server)
    const kept = await setPhoto(caller, await uploadImage(token, await png(50, 50)))
    const doc = await upload(server, token, "/v1/uploads", { bytes: new TextEncoder().encode("%PDF-1.4"), name: "a.pdf", type: "application/pdf" })
    assert.strictEqual(doc.status, 201, JSON.stringify(doc.body))
    const foreign = await uploadImage(other.token, await png(10, 10))
    for (const mediaId of [doc.body.media_id, foreign, 999_999_999, "abc", 1.5]) {
      const res = await call(server, caller, "POST", "/v1/me", { photo_media_id: mediaId })
      assert.deepStrictEqual([res.status, Object.keys(res.body.errors ?? {})], [422, ["photo_media_id"]], String(mediaId))
    }
    assert.strictEqual(await profileUrl(caller), kept)
  })

  it("needs a valid signature: unsigned, tampered or re-pointed links answer 403", async () => {
    const { caller, token } = await agent()
    const other = await agent()
    const url = new URL((await setPhoto(caller, await uploadImage(token, await png(40, 40))))!)
    const unsigned = await request(server, "GET", url.pathname)
    assert.deepStrictEqual([unsigned.status, unsigned.body], [403, { message: "Invalid signature." }])
    const tampered = await request(server, "GET", url.pathname + url.search.replace(/signature=[^&]+/, "signature=AAAA"))
    assert.deepStrictEqual([tampered.status, tampered.body], [403, { message: "Invalid signature." }])
    const otherUser = await request(server, "GET", `/v1/users/${other.user.id}/photo${url.search}`)
    assert.strictEqual(otherUser.status, 403)
    const otherCompany = await request(server, "GET", url.pathname + url.search.replace(/\bc=\d+/, `c=${other.company.id}`))
    assert.strictEqual(otherCompany.status, 403)
    // A bearer token does not stand in for the signature.
    assert.strictEqual((await request(server, "GET", url.pathname, { token })).status, 403)
  })

  it("answers 404 for a link naming a company the user is not a member of, and after the user leaves it", async () => {
    const { company, user, caller, token } = await agent()
    const second = await createCompany(server)
    await addUser(server, second.id, { email: user.email, role: "agent" })
    const stranger = await agent()
    const url = (await setPhoto(caller, await uploadImage(token, await png(30, 30))))!
    await setPhoto(stranger.caller, await uploadImage(stranger.token, await png(30, 30)))

    // The second company's colleagues see the same person with a link made for their company.
    const [inSecond] = await listedUrls(second.token, user.id)
    assert.ok(inSecond !== null && new URL(inSecond).searchParams.get("c") === String(second.id), String(inSecond))
    assert.strictEqual((await getLink(server, inSecond)).status, 200)

    // Cross-tenant: a genuinely signed link for a company the user is not in, and a user of another company.
    assert.strictEqual((await getLink(server, await signedLink(user.id, stranger.company.id))).status, 404)
    const foreign = await request(server, "GET", pathOf(await signedLink(stranger.user.id, company.id)))
    assert.deepStrictEqual([foreign.status, foreign.body], [404, { message: "Photo not found." }])
    const users = await request(server, "GET", "/v1/users", { token: company.token })
    assert.notInclude(users.body.data.map((u: { id: number }) => u.id), stranger.user.id)

    const revoked = await request(server, "POST", `/v1/companies/current/members/${user.id}/revoke`, { token: company.token })
    assert.strictEqual(revoked.status, 200, JSON.stringify(revoked.body))
    const left = await request(server, "GET", pathOf(url))
    assert.deepStrictEqual([left.status, left.body], [404, { message: "Photo not found." }])
    // Still a member of the second company: its link keeps working.
    assert.strictEqual((await getLink(server, inSecond)).status, 200)
  })
})

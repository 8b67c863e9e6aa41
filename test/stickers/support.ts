import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import sharp from "sharp"
import { BlobStore } from "../../src/platform/files/BlobStore.ts"
import { addUser, mobileLogin } from "../auth/support.ts"
import { type Json, request, type RunningServer } from "../support/TestServer.ts"

/** Real images made with sharp; every call makes fresh bytes. */
export const images = {
  png: (width = 800, height = 600) =>
    sharp({ create: { width, height, channels: 4, background: { r: 200, g: 30, b: 30, alpha: 0.8 } } }).png().toBuffer(),
  jpeg: (width = 300, height = 900) =>
    sharp({ create: { width, height, channels: 3, background: "#2a9d8f" } }).jpeg().toBuffer(),
  webp: (width = 512, height = 384) =>
    sharp({ create: { width, height, channels: 4, background: { r: 0, g: 0, b: 255, alpha: 1 } } }).webp().toBuffer(),
  /** Random pixels: the worst case for the WebP size budget. */
  noise: (side = 1024) => sharp(randomBytes(side * side * 3), { raw: { width: side, height: side, channels: 3 } }).png().toBuffer(),
  /** 6000x5000 = 30 megapixels in a small PNG (one colour compresses to almost nothing). */
  pixelFlood: () =>
    sharp({ create: { width: 6000, height: 5000, channels: 3, background: "#000000" } }).png({ compressionLevel: 9 }).toBuffer(),
  truncated: async () => {
    const whole = await sharp(randomBytes(400 * 400 * 3), { raw: { width: 400, height: 400, channels: 3 } }).png().toBuffer()
    return whole.subarray(0, Math.floor(whole.length / 2))
  },
  svg: () => Promise.resolve(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>')),
  text: () => Promise.resolve(Buffer.from("this is not an image\n".repeat(20)))
}

export interface UploadFile {
  readonly name: string
  readonly bytes: Uint8Array
  readonly type?: string
}

/** `POST /v1/sticker-packs/{pack}/stickers` as a browser sends it: multipart `files[]`. */
export const uploadStickers = async (server: RunningServer, token: string, packId: number | string, files: ReadonlyArray<UploadFile>, field = "files[]"): Promise<Json> => {
  const form = new FormData()
  for (const file of files) form.append(field, new Blob([file.bytes], { type: file.type ?? "application/octet-stream" }), file.name)
  const response = await fetch(`${server.url}/v1/sticker-packs/${packId}/stickers`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, accept: "application/json" },
    body: form
  })
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: text === "" ? null : JSON.parse(text) }
}

export const createPack = async (server: RunningServer, token: string, body: Record<string, unknown> = { name: "Pack", tray_emoji: "😀" }) => {
  const res = await request(server, "POST", "/v1/sticker-packs", { token, body })
  if (res.status !== 201) throw new Error(`createPack: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data.pack as { id: number; name: string; position: number }
}

export const listPacks = async (server: RunningServer, token: string) => {
  const res = await request(server, "GET", "/v1/sticker-packs", { token })
  if (res.status !== 200) throw new Error(`listPacks: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data as ReadonlyArray<any>
}

/** A signed link (its path and query, on the test server: links carry `APP_URL`) fetched without any Authorization header. */
export const fetchPublic = async (server: RunningServer, link: string) => {
  const url = new URL(link)
  const response = await fetch(`${server.url}${url.pathname}${url.search}`)
  return { status: response.status, headers: response.headers, bytes: new Uint8Array(await response.arrayBuffer()) }
}

/** A member with `role` and their mobile token. */
export const member = async (server: RunningServer, companyId: number, role: "admin" | "manager" | "agent") => {
  const user = await addUser(server, companyId, { role })
  const res = await mobileLogin(server, user.email, user.password)
  if (res.status !== 200) throw new Error(`login: ${res.status} ${JSON.stringify(res.body)}`)
  return { id: user.id, token: res.body.data.token as string }
}

/** Puts bytes in the company's storage through the app's own blob store; the storage path. */
export const storeFile = (server: RunningServer, companyId: number, bytes: Uint8Array, extension: string) =>
  server.runInApp(Effect.gen(function*() {
    const blobs = yield* BlobStore
    const path = blobs.newPath(companyId, "attachments", extension)
    yield* blobs.write(path, bytes)
    return path
  }).pipe(Effect.orDie))

import { Effect } from "effect"
import { BlobStore } from "../../src/platform/files/BlobStore.ts"
import { addUser, mobileLogin } from "../auth/support.ts"
import { request, type RunningServer, upload, type UploadFile } from "../support/TestServer.ts"

/** `POST /v1/sticker-packs/{pack}/stickers` as a browser sends it: multipart `files[]`. */
export const uploadStickers = (server: RunningServer, token: string, packId: number | string, files: ReadonlyArray<UploadFile>, field = "files[]") =>
  upload(server, token, `/v1/sticker-packs/${packId}/stickers`, files.map((file) => ({ ...file, field })))

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

import { spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createRequire } from "node:module"
import sharp from "sharp"
import type { Json, TestServer } from "../support/TestServer.ts"

const require = createRequire(import.meta.url)
export const ffmpegPath: string = require("@ffmpeg-installer/ffmpeg").path
export const ffprobePath: string = require("@ffprobe-installer/ffprobe").path

export const tempDir = (prefix = "crm-media-test-") => mkdtempSync(join(tmpdir(), prefix))

/** Every regular file under `dir` (relative paths). */
export const filesUnder = (dir: string): Array<string> => {
  const out: Array<string> = []
  const walk = (d: string, rel: string) => {
    for (const name of readdirSync(d)) {
      const full = join(d, name)
      if (statSync(full).isDirectory()) walk(full, rel === "" ? name : `${rel}/${name}`)
      else out.push(rel === "" ? name : `${rel}/${name}`)
    }
  }
  walk(dir, "")
  return out
}

const parse = async (response: Response): Promise<Json> => {
  const text = await response.text()
  let body: unknown = text
  try {
    body = text === "" ? null : JSON.parse(text)
  } catch {
    body = text
  }
  return { status: response.status, headers: response.headers, body }
}

/** A multipart upload of `bytes` as `field` (default `file`). */
export const upload = async (
  server: TestServer,
  token: string,
  path: string,
  file: { readonly bytes: Uint8Array; readonly name: string; readonly type: string; readonly field?: string }
) => {
  const form = new FormData()
  form.append(file.field ?? "file", new Blob([file.bytes], { type: file.type }), file.name)
  const response = await fetch(server.url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, accept: "application/json" },
    body: form
  })
  return parse(response)
}

/** GET (or HEAD) of a URL the API handed out, against the test server (the API's links carry APP_URL's origin). */
export const getLink = async (server: TestServer, link: string, headers: Record<string, string> = {}, method: "GET" | "HEAD" = "GET") => {
  const url = new URL(link)
  const response = await fetch(server.url + url.pathname + url.search, { headers, method })
  const bytes = new Uint8Array(await response.arrayBuffer())
  return { status: response.status, headers: response.headers, bytes }
}

export const png = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 4, background: { r: 200, g: 40, b: 40, alpha: 1 } } }).png().toBuffer().then((b) => new Uint8Array(b))
export const jpeg = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 3, background: { r: 20, g: 120, b: 200 } } }).jpeg().toBuffer().then((b) => new Uint8Array(b))
export const webp = (width: number, height: number) =>
  sharp({ create: { width, height, channels: 4, background: { r: 10, g: 200, b: 10, alpha: 0.5 } } }).webp().toBuffer().then((b) => new Uint8Array(b))
export const svg = new TextEncoder().encode(
  `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script><rect width="10" height="10"/></svg>`
)

/** Real audio made by ffmpeg: a sine tone in the given container. */
export const tone = (format: "wav" | "mp3" | "webm" | "ogg" | "m4a", seconds = 1.5): Uint8Array => {
  const dir = tempDir()
  const out = join(dir, `tone.${format}`)
  const codec = format === "webm" || format === "ogg" ? ["-c:a", "libopus"] : format === "m4a" ? ["-c:a", "aac"] : []
  const r = spawnSync(ffmpegPath, ["-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", `sine=frequency=440:duration=${seconds}`, ...codec, "-y", out])
  if (r.status !== 0) throw new Error(`ffmpeg: ${r.stderr}`)
  return new Uint8Array(readFileSync(out))
}

/** ffprobe's view of a file: format name and the first stream's codec. */
export const probe = (file: string) => {
  const r = spawnSync(ffprobePath, ["-v", "error", "-show_entries", "format=format_name,duration:stream=codec_name,channels,sample_rate", "-of", "json", file])
  if (r.status !== 0) throw new Error(`ffprobe: ${r.stderr}`)
  return JSON.parse(r.stdout.toString()) as {
    format: { format_name: string; duration: string }
    streams: Array<{ codec_name: string; channels: number; sample_rate: string }>
  }
}

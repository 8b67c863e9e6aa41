import { assert } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { conversationOn, send } from "../messages/support.ts"
import { type RunningServer, upload } from "../support/TestServer.ts"

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

/** Sends `file` as an attachment of a new conversation's message; the message's attachment (with `url` and `thumbnail_url`). */
export const attached = async (server: RunningServer, token: string, file: { bytes: Uint8Array; name: string; type: string }) => {
  const up = await upload(server, token, "/v1/uploads", file)
  assert.strictEqual(up.status, 201, JSON.stringify(up.body))
  const c = await conversationOn(server, token)
  const sent = await send(server, token, { channel_id: c.channelId, thread_id: c.threadId, attachments: [{ media_id: up.body.media_id }] })
  assert.strictEqual(sent.status, 201, JSON.stringify(sent.body))
  return { ...sent.body.data.attachments[0], message_id: sent.body.data.id as number }
}

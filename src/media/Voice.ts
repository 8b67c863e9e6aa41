import { Context, Effect, Layer, Option, Schema, Semaphore } from "effect"
import { spawn } from "node:child_process"
import { accessSync, constants } from "node:fs"
import { open } from "node:fs/promises"
import { createRequire } from "node:module"
import { delimiter, join } from "node:path"
import { AppConfig } from "../platform/Config.ts"
import { extensionOf, normalizeMime } from "./Domain.ts"

/** Why a voice note was refused; the message is safe to show. */
export class VoiceRejected extends Schema.TaggedError<VoiceRejected>()("VoiceRejected", {
  message: Schema.String
}) {}

/** The spec's voice types: webm, ogg, mp4, mpeg, wav, aac, m4a. */
const voiceExtensions = new Set(["webm", "ogg", "oga", "opus", "mp4", "m4a", "mpeg", "mp3", "mpga", "wav", "aac"])
const voiceMimes = new Set([
  "audio/webm",
  "video/webm",
  "audio/ogg",
  "video/ogg",
  "application/ogg",
  "audio/opus",
  "audio/mp4",
  "video/mp4",
  "audio/m4a",
  "audio/x-m4a",
  "audio/mpeg",
  "audio/mp3",
  "video/mpeg",
  "audio/wav",
  "audio/x-wav",
  "audio/wave",
  "audio/vnd.wave",
  "audio/aac",
  "audio/x-aac",
  "audio/aacp"
])
const playlistExtensions = new Set(["m3u8", "m3u", "pls", "xspf", "asx", "ffconcat", "concat", "txt", "sdp"])

export const voiceTypesMessage = "The file must be a file of type: webm, ogg, mp4, mpeg, wav, aac, m4a."
const playlistMessage = "Playlists and concat lists are not accepted as voice notes."

/** Checks the declared name and type before any byte is stored. */
export const acceptsDeclared = (fileName: string, contentType: string): Option.Option<string> => {
  const ext = extensionOf(fileName)
  if (fileName.toLowerCase().includes("concat:") || (ext !== null && playlistExtensions.has(ext))) return Option.some(playlistMessage)
  const mime = normalizeMime(contentType)
  if (mime !== null && (mime.includes("mpegurl") || mime.includes("playlist"))) return Option.some(playlistMessage)
  return (ext !== null && voiceExtensions.has(ext)) || (mime !== null && voiceMimes.has(mime)) ? Option.none() : Option.some(voiceTypesMessage)
}

const startsWith = (bytes: Uint8Array, text: string, at = 0) =>
  bytes.length >= at + text.length && [...text].every((c, i) => bytes[at + i] === c.charCodeAt(0))

/** A demuxer name, or why the file is refused. */
type Sniffed = { readonly value: string; readonly error?: undefined } | { readonly error: string; readonly value?: undefined }

/**
 * The ffmpeg demuxer for the file's real format, by its leading bytes. Forcing it (`-f`)
 * keeps ffmpeg from probing into the playlist (HLS), concat or image-sequence demuxers,
 * which can read other local files; anything unrecognised is refused.
 */
export const demuxerOf = (head: Uint8Array): Sniffed => {
  const text = Buffer.from(head.subarray(0, 32)).toString("latin1").trimStart()
  if (/^(#EXTM3U|#EXT-X|ffconcat|\[playlist\]|<\?xml|<asx|file\s)/i.test(text)) return { error: playlistMessage }
  if (startsWith(head, "OggS")) return { value: "ogg" }
  if (head.length >= 4 && head[0] === 0x1a && head[1] === 0x45 && head[2] === 0xdf && head[3] === 0xa3) return { value: "matroska" }
  if (startsWith(head, "RIFF") && startsWith(head, "WAVE", 8)) return { value: "wav" }
  if (startsWith(head, "ftyp", 4)) return { value: "mov" }
  if (startsWith(head, "ID3")) return { value: "mp3" }
  if (head.length >= 2 && head[0] === 0xff && (head[1] & 0xf6) === 0xf0) return { value: "aac" }
  if (head.length >= 2 && head[0] === 0xff && (head[1] & 0xe0) === 0xe0 && (head[1] & 0x06) !== 0) return { value: "mp3" }
  return { error: "The file is not audio in one of the accepted formats." }
}

/** Seconds of an Ogg Opus file from its first and last bytes: the last page's granule position at 48 kHz, less the pre-skip. */
export const opusDuration = (first: Uint8Array, last: Uint8Array): number | null => {
  const head = Buffer.from(first.buffer, first.byteOffset, first.byteLength)
  const tail = Buffer.from(last.buffer, last.byteOffset, last.byteLength)
  const opusHead = head.indexOf("OpusHead")
  const page = tail.lastIndexOf("OggS")
  if (opusHead < 0 || page < 0 || page + 14 > tail.length || opusHead + 12 > head.length) return null
  const preSkip = head.readUInt16LE(opusHead + 10)
  const granule = Number(tail.readBigUInt64LE(page + 6))
  return granule > preSkip ? Math.round(((granule - preSkip) / 48_000) * 100) / 100 : 0
}

/** Up to `length` bytes of a local file from `position` (negative: from the end). */
const readSlice = (path: string, position: number, length: number) =>
  Effect.tryPromise({
    try: async () => {
      const handle = await open(path, "r")
      try {
        const size = (await handle.stat()).size
        const start = position < 0 ? Math.max(0, size + position) : position
        const buffer = new Uint8Array(Math.max(0, Math.min(length, size - start)))
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, start)
        return buffer.subarray(0, bytesRead)
      } finally {
        await handle.close()
      }
    },
    catch: () => new VoiceRejected({ message: "The file could not be read." })
  })

const executable = (path: string) => {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** `FFMPEG_PATH`, else `ffmpeg` on `PATH`, else the binary shipped by `@ffmpeg-installer/ffmpeg`. */
export const locateFfmpeg = (configured: Option.Option<string>): Option.Option<string> => {
  if (Option.isSome(configured)) return configured
  for (const dir of (process.env.PATH ?? "").split(delimiter).filter((d) => d !== "")) {
    const candidate = join(dir, "ffmpeg")
    if (executable(candidate)) return Option.some(candidate)
  }
  return Option.liftThrowable(() => (createRequire(import.meta.url)("@ffmpeg-installer/ffmpeg") as { path: string }).path)()
}

const timeLimitMs = 60_000
const concurrency = 2

/**
 * Voice notes: any accepted audio (or video) file becomes mono Opus in an Ogg container,
 * which messengers show as a voice note. ffmpeg runs without a shell, with an empty
 * environment, reading only `file` and `pipe` protocols, with a forced demuxer and a time
 * limit; at most two run at once per process.
 */
export class Voice extends Context.Service<Voice, {
  /** Transcodes `input` into `output` (both local files); the note's duration in seconds, when readable. */
  transcode(input: string, output: string): Effect.Effect<{ readonly duration: number | null }, VoiceRejected>
}>()("crm/media/Voice") {
  static readonly layer = Layer.effect(
    Voice,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const binary = locateFfmpeg(config.ffmpegPath)
      const permits = yield* Semaphore.make(concurrency)

      const run = (args: ReadonlyArray<string>) =>
        Effect.callback<{ readonly code: number | null; readonly stderr: string }, VoiceRejected>((resume) => {
          if (Option.isNone(binary)) {
            resume(Effect.fail(new VoiceRejected({ message: "Voice transcoding is not available on this server." })))
            return
          }
          const child = spawn(binary.value, args, {
            stdio: ["ignore", "ignore", "pipe"],
            env: {},
            timeout: timeLimitMs,
            killSignal: "SIGKILL"
          })
          let stderr = ""
          child.stderr.on("data", (chunk: Buffer) => {
            if (stderr.length < 4000) stderr += chunk.toString("utf8")
          })
          child.on("error", () => resume(Effect.fail(new VoiceRejected({ message: "Voice transcoding could not start." }))))
          child.on("close", (code, signal) =>
            resume(
              signal !== null
                ? Effect.fail(new VoiceRejected({ message: "Voice transcoding took too long." }))
                : Effect.succeed({ code, stderr })
            ))
          return Effect.sync(() => child.kill("SIGKILL"))
        })

      const transcode = Effect.fn("Voice.transcode")(function*(input: string, output: string) {
        const head = yield* readSlice(input, 0, 64)
        const demuxer = demuxerOf(head)
        if (demuxer.error !== undefined) return yield* new VoiceRejected({ message: demuxer.error })
        const result = yield* permits.withPermits(1)(run([
          "-hide_banner",
          "-nostdin",
          "-loglevel",
          "error",
          "-protocol_whitelist",
          "file,pipe",
          "-f",
          demuxer.value,
          "-i",
          `file:${input}`,
          "-map",
          "0:a:0",
          "-vn",
          "-sn",
          "-dn",
          "-map_metadata",
          "-1",
          "-c:a",
          "libopus",
          "-b:a",
          "32k",
          "-ac",
          "1",
          "-ar",
          "48000",
          "-application",
          "voip",
          "-threads",
          "1",
          "-f",
          "ogg",
          "-y",
          `file:${output}`
        ]))
        if (result.code !== 0) {
          yield* Effect.logInfo("voice transcoding failed", { stderr: result.stderr.slice(0, 500) })
          return yield* new VoiceRejected({ message: "The file could not be transcoded to a voice note." })
        }
        const [first, last] = yield* Effect.all([readSlice(output, 0, 4096), readSlice(output, -65_536, 65_536)])
        const duration = opusDuration(first, last)
        if (first.byteLength === 0 || duration === 0) return yield* new VoiceRejected({ message: "The file holds no audio." })
        return { duration }
      })

      return Voice.of({ transcode })
    })
  )
}

import { Effect } from "effect"
import { fileTypeFromBuffer, supportedMimeTypes } from "file-type"

/** How many leading bytes `file-type` needs to recognise every format it knows. */
export const sniffBytes = 4100

const supported: ReadonlySet<string> = new Set(supportedMimeTypes)

/** Containers whose declared subtype is more precise than what the bytes show (an .xlsx is a zip). */
const refines = (declared: string, detected: string) =>
  (detected === "application/zip" && (declared.includes("openxmlformats") || declared.includes("opendocument") || declared.endsWith("+zip"))) ||
  (detected === "application/x-cfb" && (declared === "application/msword" || declared === "application/vnd.ms-excel")) ||
  // The same container carries audio or video (and m4a is mp4): which one is the sender's call.
  (/^(audio|video)\//.test(detected) && /^(audio|video)\//.test(declared))

const looksLikeText = (head: Uint8Array) => {
  if (head.includes(0)) return false
  try {
    // A cut multi-byte character at the end of the head is not a sign of binary data.
    new TextDecoder("utf-8", { fatal: true }).decode(head.subarray(0, Math.max(0, head.length - 4)))
    return true
  } catch {
    return false
  }
}

/**
 * The type the bytes say, given the type the client declared. A format `file-type` recognises wins
 * over a declaration that contradicts it (a PNG sent as text/html is image/png). A declared binary
 * format the bytes do not carry (HTML sent as image/png) is replaced by text/plain or
 * application/octet-stream. Formats without a signature (text, CSV, JSON, SVG) keep their declaration.
 */
export const sniffMime = (head: Uint8Array, declared: string) =>
  Effect.promise(() => fileTypeFromBuffer(head)).pipe(
    Effect.map((detected) => {
      if (detected !== undefined) return detected.mime === declared || refines(declared, detected.mime) ? declared : detected.mime
      if (!supported.has(declared)) return declared
      return looksLikeText(head) ? "text/plain" : "application/octet-stream"
    })
  )

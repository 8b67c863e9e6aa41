import { Cause, Logger, Predicate, References } from "effect"
import { pino } from "pino"

/** Field names whose values never reach a log line, at any depth pino's redaction reaches. */
const secretFields = ["password", "token", "code", "signature", "secret", "authorization", "cookie"]

// Asynchronous writes: a synchronous write per access-log line was a measurable share of a request.
// A buffer that waits for 4 KB hides a quiet server's lines for minutes, so it is flushed every
// 100 ms, and written synchronously at exit (an asynchronous flush would not finish there).
const destination = pino.destination({ sync: false, minLength: 4096 })

export const log = pino({
  level: process.env.LOG_LEVEL ?? "info",
  base: undefined,
  timestamp: pino.stdTimeFunctions.isoTime,
  redact: { paths: secretFields.flatMap((f) => [f, `*.${f}`]), censor: "[redacted]" }
}, destination)

setInterval(() => log.flush(), 100).unref()
process.once("exit", () => {
  try {
    destination.flushSync()
  } catch {
    // Thrown only before the file descriptor is open, when nothing has been buffered yet.
  }
})

const secretParams = new Set(secretFields)

/** A request path for the access log: the values of secret query parameters (signed links, codes) are cut. */
export const loggablePath = (url: string) => {
  const at = url.indexOf("?")
  if (at < 0) return url
  const params = new URLSearchParams(url.slice(at + 1))
  let changed = false
  for (const key of new Set(params.keys())) {
    if (secretParams.has(key.toLowerCase())) {
      params.set(key, "[redacted]")
      changed = true
    }
  }
  return changed ? `${url.slice(0, at)}?${params.toString()}` : url
}

const levels: Record<string, "trace" | "debug" | "info" | "warn" | "error" | "fatal"> = {
  Trace: "trace",
  Debug: "debug",
  Info: "info",
  Warn: "warn",
  Error: "error",
  Fatal: "fatal"
}

/**
 * The same line (level and text) at most once per `windowMs`; the next one that gets through
 * carries `repeated`, the count of those left out. A loop that fails at once on every turn
 * otherwise writes megabytes a second and starves the process of CPU.
 */
export const makeRepeatGate = (windowMs: number, maxKeys = 10_000) => {
  const lines = new Map<string, { at: number; suppressed: number }>()
  return (key: string, now: number): number | undefined => {
    const seen = lines.get(key)
    if (seen !== undefined && now - seen.at < windowMs) {
      seen.suppressed += 1
      return undefined
    }
    const repeated = seen?.suppressed ?? 0
    if (seen === undefined && lines.size >= maxKeys) {
      for (const [k, v] of lines) if (now - v.at >= windowMs) lines.delete(k)
      if (lines.size >= maxKeys) lines.clear()
    }
    lines.set(key, { at: now, suppressed: 0 })
    return repeated
  }
}

const repeatGate = makeRepeatGate(1_000)

const pinoLogger = Logger.make(({ cause, date, fiber, logLevel, message }) => {
  const level = levels[logLevel]
  if (level === undefined || !log.isLevelEnabled(level)) return
  const fields: Record<string, unknown> = { ...fiber.getRef(References.CurrentLogAnnotations) }
  const parts = Array.isArray(message) ? message : [message]
  // Structured parts stay fields (so they can be queried and redacted); text parts make the message.
  const text: Array<string> = []
  for (const part of parts) {
    if (Predicate.isString(part)) text.push(part)
    else if (Predicate.isObject(part) && !Array.isArray(part) && !(part instanceof Error)) Object.assign(fields, part)
    else text.push(part instanceof Error ? part.message : JSON.stringify(part))
  }
  const line = text.join(" ")
  // A bare cause (no text) is told apart by its error, so distinct failures are not folded into one.
  const key = line === "" && cause.reasons.length > 0 ? `${level} ${String(Cause.squash(cause))}` : `${level} ${line}`
  const repeated = repeatGate(key, date.getTime())
  if (repeated === undefined) return
  if (repeated > 0) fields.repeated = repeated
  if (cause.reasons.length > 0) fields.cause = Cause.pretty(cause)
  log[level](fields, line)
})

/** Effect's logger writes JSON lines through pino; log annotations (request id) become fields. */
export const LoggingLayer = Logger.layer([pinoLogger])

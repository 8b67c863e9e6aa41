import { Cause, Logger, Predicate, References } from "effect"
import { pino } from "pino"

/** Field names whose values never reach a log line, at any depth pino's redaction reaches. */
const secretFields = ["password", "token", "code", "signature", "secret", "authorization", "cookie"]

// Asynchronous writes: a synchronous write per access-log line was a measurable share of a request.
// A buffer that waits for 4 KB hides a quiet server's lines for minutes, so it is flushed every
// 100 ms and at exit.
export const log = pino({
  level: process.env.LOG_LEVEL ?? "info",
  base: undefined,
  timestamp: pino.stdTimeFunctions.isoTime,
  redact: { paths: secretFields.flatMap((f) => [f, `*.${f}`]), censor: "[redacted]" }
}, pino.destination({ sync: false, minLength: 4096 }))

setInterval(() => log.flush(), 100).unref()
process.once("exit", () => log.flush())

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

const pinoLogger = Logger.make(({ cause, fiber, logLevel, message }) => {
  const level = levels[logLevel]
  if (level === undefined || !log.isLevelEnabled(level)) return
  const fields: Record<string, unknown> = { ...fiber.getRef(References.CurrentLogAnnotations) }
  if (cause.reasons.length > 0) fields.cause = Cause.pretty(cause)
  const parts = Array.isArray(message) ? message : [message]
  // Structured parts stay fields (so they can be queried and redacted); text parts make the message.
  const text: Array<string> = []
  for (const part of parts) {
    if (Predicate.isString(part)) text.push(part)
    else if (Predicate.isObject(part) && !Array.isArray(part) && !(part instanceof Error)) Object.assign(fields, part)
    else text.push(part instanceof Error ? part.message : JSON.stringify(part))
  }
  log[level](fields, text.join(" "))
})

/** Effect's logger writes JSON lines through pino; log annotations (request id) become fields. */
export const LoggingLayer = Logger.layer([pinoLogger])

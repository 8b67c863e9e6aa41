import { Cause, Logger, References } from "effect"
import { pino } from "pino"

// Asynchronous writes: a synchronous write per access-log line was a measurable share of a request.
export const log = pino({
  level: process.env.LOG_LEVEL ?? "info",
  base: undefined,
  timestamp: pino.stdTimeFunctions.isoTime
}, pino.destination({ sync: false, minLength: 4096 }))

process.once("exit", () => log.flush())

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
  log[level](fields, parts.map((p) => (typeof p === "string" ? p : JSON.stringify(p))).join(" "))
})

/** Effect's logger writes JSON lines through pino; log annotations (request id) become fields. */
export const LoggingLayer = Logger.layer([pinoLogger])
